"""The dispatcher's client: seed 002's `ElasticDispatcher` API as a library a tenant process embeds.

Writes are records on `dispatch-commands` (key = namespace), each acknowledged by the broker
before the call returns: the call's result is the record's coordinates (`Written`), and an
assign's uuids follow from them (the fold makes them from the record's topic, partition and
offset), so the caller knows its jobs' uuids at once. The listeners run in this process: `run()`
follows `job-starts` and `job-outcomes` (read_committed) in a consumer group of its own and calls
`on_job_start` for each start of this namespace's `workers` (every worker if none are named), and
`on_job_fail` for each job that failed for good. Offsets are committed after the listeners
returned, so a restarted client sees a start again rather than never: a listener must be
idempotent by (uuid, attempt). A listener that raises is logged and the next record delivered
(its record counts as delivered: the listener owns its own retries). A record that cannot be read (not
JSON, or not the record its topic carries) is logged and passed over likewise: the client never stops on one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from schemas import dispatch as records
from streams import kafka
from streams.clients import Writer, Written
from streams.core.dispatch import DISPATCH_COMMANDS, JOB_OUTCOMES, JOB_STARTS, job_uuid
from streams.settings import Settings

log = logging.getLogger(__name__)

Listener = Callable[[Any], Awaitable[None] | None]


@dataclass
class JobAssign:
    """The seed's `JobAssign` builder: n jobs for one worker, expected at `start`, acceptable starts
    spread evenly over [start, end]: `JobAssign("w1").start(t).end(t + 60_000).job("a").job("b")`."""

    worker_name: str
    start_ms: int = 0
    end_ms: int = 0
    jobs: list[records.JobSpec] = field(default_factory=list)
    request_id: str | None = None

    def start(self, ms: int) -> JobAssign:
        self.start_ms = ms
        self.end_ms = max(self.end_ms, ms)
        return self

    def end(self, ms: int) -> JobAssign:
        self.end_ms = ms
        return self

    def job(self, external_id: str, info: str = "", max_retries: int = 0, timeout_ms: int = 60_000) -> JobAssign:
        self.jobs.append(records.JobSpec(external_id=external_id, info=info, max_retries=max_retries,
                                         timeout_ms=timeout_ms))
        return self

    def request(self, request_id: str) -> JobAssign:
        self.request_id = request_id
        return self

    def build(self, namespace: str) -> records.JobsAssigned:
        return records.JobsAssigned(namespace=namespace, worker=self.worker_name, start=self.start_ms,
                                    end=self.end_ms, jobs=self.jobs, request_id=self.request_id)


def uuids_of(written: Written, n: int) -> list[str]:
    """The uuids the fold makes for the n jobs of the assign written at `written`."""
    return [job_uuid(DISPATCH_COMMANDS, written.partition, written.offset, i) for i in range(n)]


class Assigned(NamedTuple):
    written: Written
    uuids: list[str]  # the jobs' uuids, in the order they were added to the builder


class DispatcherClient(Writer):
    """`async with DispatcherClient(settings, "ns") as client: await client.assign_job(...)`."""

    def __init__(self, settings: Settings, namespace: str, workers: set[str] | None = None,
                 group_id: str | None = None) -> None:
        self.settings, self.namespace, self.workers = settings, namespace, workers
        # Starts are keyed by namespace: two clients of one namespace in one group would split its
        # partition's records between them and each drop the other's. One group per set of workers.
        tenants = ",".join(sorted(workers)) if workers is not None else "*"
        self.group_id = group_id or f"{settings.app_id}-dispatcher-client-{namespace}-{tenants}"
        self._on_start: Listener | None = None
        self._on_fail: Listener | None = None

    # -- the seed's API ----------------------------------------------------------------------------
    def on_job_start(self, listener: Listener) -> None:
        """The listener each start of this namespace's workers is handed to (a `schemas.dispatch.JobStarted`)."""
        self._on_start = listener

    def on_job_fail(self, listener: Listener) -> None:
        """The listener each job that failed for good is handed to (a `JobOutcome` of type JobFailedFinally)."""
        self._on_fail = listener

    async def set_max_threads(self, n: int) -> Written:
        return await self.send(records.MaxThreadsSet(namespace=self.namespace, max=n))

    async def set_worker_max(self, worker: str, n: int) -> Written:
        return await self.send(records.WorkerMaxSet(namespace=self.namespace, worker=worker, max=n))

    async def assign_job(self, assign: JobAssign) -> Assigned:
        command = assign.build(self.namespace)
        written = await self.send(command)
        return Assigned(written, uuids_of(written, len(command.jobs)))

    async def finish_job(self, uuid: str, attempt: int | None = None) -> Written:
        """Report `attempt` of job `uuid` done (its `JobStarted.attempt`: give it, so that a report which
        outlives its attempt's timeout is recorded as late, not applied to the retry)."""
        return await self.send(records.JobFinished(namespace=self.namespace, uuid=uuid, attempt=attempt))

    async def fail_job(self, uuid: str, error: str = "", attempt: int | None = None) -> Written:
        return await self.send(records.JobFailed(namespace=self.namespace, uuid=uuid, attempt=attempt, error=error))

    async def cancel_job(self, uuid: str) -> Written:
        return await self.send(records.JobCancelled(namespace=self.namespace, uuid=uuid))

    async def send(self, command: records.Command) -> Written:
        """Write one command (keyed by its namespace) and wait for the broker's acknowledgement."""
        return await self.write(DISPATCH_COMMANDS, command.namespace, command.model_dump_json().encode())

    # -- listening ---------------------------------------------------------------------------------
    def _mine(self, value: dict[str, Any]) -> bool:
        return value.get("namespace") == self.namespace and (self.workers is None or value.get("worker")
                                                             in self.workers)

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Call the listeners for every start and final failure, until cancelled; `ready` is set once the
        consumer holds its partitions (records written after that reach the listeners)."""
        starts, outcomes = self.settings.topic(JOB_STARTS), self.settings.topic(JOB_OUTCOMES)
        consumer = kafka.consumer(self.settings.kafka_bootstrap, starts, outcomes, group_id=self.group_id,
                                  auto_offset_reset="latest")
        await consumer.start()
        try:
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=100)  # joins the group; nothing is delivered before assignment
            for tp in consumer.assignment():
                await consumer.position(tp)  # "latest" is fixed now, before the caller writes anything
            if ready is not None:
                ready.set()
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for tp in sorted(batch, key=lambda tp: (tp.topic, tp.partition)):
                    for message in batch[tp]:
                        await self._deliver(tp.topic == starts, message)
                if batch:
                    await consumer.commit()
        finally:
            await consumer.stop()

    async def _deliver(self, is_start: bool, message: Any) -> None:
        """Hand one consumed record to its listener; one that cannot be read is logged and passed over."""
        value = kafka.json_object(message)
        if value is None or not self._mine(value):
            return
        record: records.JobStarted | records.JobOutcome | None
        if is_start:
            listener, record = self._on_start, kafka.validated(message, value, records.JobStarted)
        elif value.get("type") == "JobFailedFinally":
            listener, record = self._on_fail, kafka.validated(message, value, records.JobOutcome)
        else:
            return
        if listener is not None and record is not None:
            await hand_over(listener, record)


async def hand_over(listener: Listener, record: records.JobStarted | records.JobOutcome) -> None:
    """Call a tenant's listener with a record; one that raises is logged, and the next record delivered."""
    try:
        result = listener(record)
        if inspect.isawaitable(result):
            await result
    except Exception:  # the tenant's code: one failing call must not stop the others
        log.exception("the listener failed on %s %s attempt %s", record.type, record.uuid, record.attempt)
