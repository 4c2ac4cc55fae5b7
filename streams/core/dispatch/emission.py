"""What the dispatcher writes, numbered per stream as it is made: job starts, outcomes, the namespace's health."""

from __future__ import annotations

from typing import Any

from streams.core.dispatch.state import DispatchState, Job
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, cause_of

JOB_STARTS = "job-starts"
JOB_OUTCOMES = "job-outcomes"
DISPATCHER_HEALTH = "dispatcher-health"
OUTPUTS: tuple[str, ...] = (JOB_STARTS, JOB_OUTCOMES, DISPATCHER_HEALTH)


class Out:
    """The outputs of one input record, numbered per stream as they are made."""

    def __init__(self, record: SourceRecord, namespace: str, state: DispatchState) -> None:
        self.record, self.namespace, self.state = record, namespace, state
        self.seqs: dict[str, int] | None = None  # copied from the state's at the first emit
        self.cause: dict[str, Any] = {}
        self.emits: list[Emit] = []

    def emit(self, stream: str, body: dict[str, Any]) -> None:
        if self.seqs is None:
            self.seqs = dict(self.state.seqs)
            self.cause = cause_of(self.record, self.state.applied)
        seq = self.seqs[stream] = self.seqs.get(stream, 0) + 1
        body["cause"] = self.cause
        body["seq"] = seq
        self.emits.append(Emit(stream, self.namespace, body))

    def outcome(self, kind: str, job: Job, at: int, final: bool, error: str = "") -> None:
        self.emit(JOB_OUTCOMES, {"type": kind, "namespace": self.namespace, "uuid": job.uuid,
                                 "external_id": job.external_id, "worker": job.worker, "attempt": job.attempt,
                                 "at": at, "final": final, "error": error})


def numbered(state: DispatchState, seqs: dict[str, int]) -> DispatchState:
    numbered = state.copy()
    numbered.seqs = seqs
    return numbered
