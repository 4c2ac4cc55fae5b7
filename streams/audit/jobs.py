"""A job's history (`tribunal audit explain --job`): why it started when it did and not earlier.

Derived like every explanation: the namespace's records are replayed through the pure core in the
order the worker applied them, and after each one the job's standing is read from the state (the
dispatcher's `view.standing`): its expected start not reached yet, or startable and held by the
namespace's cap or its worker's, with its place among the startable jobs. Consecutive records that
leave it held for the same reason under the same caps are one step, so a wait of a thousand ticks
reads as one line.
"""

from __future__ import annotations

from typing import Any

import orjson

from streams import kafka
from streams.audit.explain import replayed
from streams.audit.kafka_log import KafkaLog
from streams.core.dispatch import DISPATCH_COMMANDS, JOB_OUTCOMES, TICKS, DispatchState
from streams.core.dispatch import view as dispatch_view
from streams.core.folds import DISPATCH
from streams.core.source import SourceRecord
from streams.errors import NotFound
from streams.settings import Settings

_SAME_STEP = ("status", "reason", "namespace_max", "worker_max", "namespace_max_set_by", "worker_max_set_by")
# a wait's step changes when one of these does


def namespace_of(log: KafkaLog, settings: Settings, uuid: str) -> str:
    """The namespace whose `JobsAccepted` lists the job."""
    topic = settings.topic(JOB_OUTCOMES)
    for (recorded_topic, key), records in log.recorded.items():
        if recorded_topic == topic and any(_accepted(r, uuid) for r in records):
            return key
    raise NotFound(f"no JobsAccepted lists job {uuid!r} on {topic}: not a job of this deployment, or its "
                   "assign is not decided yet")


def _accepted(record: SourceRecord, uuid: str) -> bool:
    if record.value is None or uuid.encode() not in record.value:
        return False
    value = orjson.loads(record.value)
    return value.get("type") == "JobsAccepted" and uuid in value.get("uuids", ())


def job_history(log: KafkaLog, settings: Settings, uuid: str, namespace: str | None = None) -> dict[str, Any]:
    """The job's assign, each wait (why, under which caps, its place in the queue), each start with the
    counts it started under, and each outcome, up to its final one."""
    namespace = namespace or namespace_of(log, settings, uuid)
    ticks, commands, mark = settings.topic(TICKS), settings.topic(DISPATCH_COMMANDS), uuid.encode()
    history = _History(uuid)
    caps_set_by: dict[str | None, str | None] = {}  # who set the namespace's cap (None) and each worker's
    for record, _, before, after, rows in replayed(log, settings, only=(DISPATCH.name, namespace)):
        where = _where(record, after.now)
        command = kafka.object_of(record.value) if record.topic == commands else None
        principal = command.get("principal") if command else None
        if command is not None and command.get("type") in ("MaxThreadsSet", "WorkerMaxSet"):
            caps_set_by[command.get("worker")] = principal
        if any(mark in row.value for row in rows):  # decoded only where the job is named (not every tick's health)
            outputs = [orjson.loads(row.value) for row in rows]
            for output in outputs:
                if output.get("uuid") == uuid or uuid in output.get("uuids", ()):
                    history.add({**_event(uuid, output, where, before, after, outputs), "principal": principal})
                elif output["type"] == "DeadLetter" and (refused := _refused(output, uuid)) is not None:
                    history.add({"step": "refused", "by": where, **refused, "principal": principal,
                                 "reason_code": output["reason_code"], "reason": output["reason"]})
        standing = dispatch_view.standing(after, uuid)
        if standing is not None:
            job = after.jobs.get(uuid)
            standing["namespace_max_set_by"] = caps_set_by.get(None)
            standing["worker_max_set_by"] = caps_set_by.get(job.worker) if job is not None else None
            history.wait(standing, where, record.topic == ticks, after)
        elif history.steps and after.jobs.get(uuid) is None:
            break  # its final outcome: it has left the state
    history.close()
    if not history.steps:
        raise NotFound(f"job {uuid!r} does not appear in namespace {namespace!r}'s log")
    return {"job": uuid, "namespace": namespace, "steps": history.steps}


class _History:
    """The steps so far; a wait stays open while nothing that explains it changes. Its place in the queue
    (a pass over the namespace's jobs) is taken where it begins and ends, not after every record."""

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid
        self.steps: list[dict[str, Any]] = []
        self.open: tuple[dict[str, Any], DispatchState] | None = None  # a wait, and the state after its last record

    def add(self, step: dict[str, Any]) -> None:
        self.close()
        self.steps.append(step)

    def wait(self, standing: dict[str, Any], where: dict[str, Any], tick: bool, state: DispatchState) -> None:
        if self.open is not None and all(self.open[0][k] == standing[k] for k in _SAME_STEP):
            step = self.open[0]
            step.update(to=where, records=step["records"] + 1, ticks=step["ticks"] + tick,
                        namespace_running=standing["namespace_running"], worker_running=standing["worker_running"])
        else:
            self.close()
            step = {"step": "waited", "from": where, "to": where, "records": 1, "ticks": int(tick), **standing,
                    "place_first": dispatch_view.place(state, self.uuid)}
            self.steps.append(step)
        self.open = (step, state)

    def close(self) -> None:
        if self.open is not None:
            step, state = self.open
            step["place_last"] = dispatch_view.place(state, self.uuid)
            self.open = None


def _refused(dead: dict[str, Any], uuid: str) -> dict[str, Any] | None:
    """The command a dead letter refused, if it names the job (a report for an attempt that had ended, say)."""
    try:
        command = orjson.loads(dead.get("original_value") or b"null")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(command, dict) or command.get("uuid") != uuid:
        return None
    return {"type": command.get("type"), "attempt": command.get("attempt")}


def _where(record: SourceRecord, now: int) -> dict[str, Any]:
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset, "now": now}


def _event(uuid: str, output: dict[str, Any], where: dict[str, Any], before: DispatchState, after: DispatchState,
           outputs: list[dict[str, Any]]) -> dict[str, Any]:
    kind = output["type"]
    if kind == "JobsAccepted":
        step = {"step": "assigned", "by": where, "worker": output["worker"], "request_id": output.get("request_id")}
        job = after.jobs.get(uuid)  # None if it was cancelled or failed in the same record: then no details
        if job is not None:
            step.update(external_id=job.external_id, expected_start=job.expected_start,
                        acceptable_start=job.acceptable_start, max_retries=job.max_retries, timeout_ms=job.timeout_ms)
        return step
    if kind == "JobStarted":
        start = next(s for s in dispatch_view.explain(before, outputs)["starts"] if s["uuid"] == uuid)
        return {"step": "started", "by": where, **start}
    return {"step": "outcome", "by": where, "type": kind, "attempt": output.get("attempt"),
            "final": output.get("final"), "error": output.get("error") or ""}


REASONS = {"expected_start": "its expected start had not come",
           "namespace_cap": "the namespace was at its cap", "worker_cap": "its worker was at its cap",
           "none": "nothing held it (the fold should have started it)"}


def render_history(found: dict[str, Any]) -> str:
    """The history as an operator reads it, a line or two per step."""
    lines = [f"job       {found['job']} in namespace {found['namespace']}"]
    for step in found["steps"]:
        kind = step["step"]
        if kind == "assigned":
            lines.append(f"assigned  by {_at(step['by'])} to worker {step['worker']}"
                         + (f" (request {step['request_id']})" if step.get("request_id") else "") + _who(step))
            if "expected_start" in step:
                lines.append(f"          external id {step['external_id']}, expected start {step['expected_start']}, "
                             f"acceptable start {step['acceptable_start']}, timeout {step['timeout_ms']} ms, "
                             f"at most {step['max_retries']} retries")
        elif kind == "waited":
            span = f"now {step['from']['now']}" + (f" .. {step['to']['now']}" if step["to"] != step["from"] else "")
            lines.append(f"waited    {span} ({step['records']} records, {step['ticks']} ticks): "
                         f"{REASONS[step['reason']]}")
            detail = dispatch_view.counts_line(step) + _caps_by(step)
            if step["status"] == "startable":
                detail += f"; place in the startable queue {step['place_first']}" + (
                    f" -> {step['place_last']}" if step["place_last"] != step["place_first"] else "")
            lines.append(f"          {detail}")
        elif kind == "started":
            lines.append(f"started   attempt {step['attempt']} at {step['started_at']} by {_at(step['by'])} (expected "
                         f"{step['expected_start']}, acceptable {step['acceptable_start']})")
            lines.append(f"          {dispatch_view.because(step)}")
        elif kind == "refused":
            named = f" (attempt {step['attempt']})" if step["attempt"] is not None else ""
            lines.append(f"refused   {step['type']}{named} by {_at(step['by'])}: {step['reason_code']}: "
                         f"{step['reason']}{_who(step)}")
        else:
            lines.append(f"{'final' if step['final'] else 'outcome':<9} {step['type']} (attempt {step['attempt']}) "
                         f"by {_at(step['by'])}" + (f": {step['error']}" if step["error"] else "") + _who(step))
    return "\n".join(lines)


def _who(step: dict[str, Any]) -> str:
    """Who sent the command behind a step, as the record names its principal."""
    return f"; sent by {step['principal']}" if step.get("principal") else ""


def _caps_by(step: dict[str, Any]) -> str:
    said = [f"{what} cap set by {step[key]}" for what, key in (("the namespace's", "namespace_max_set_by"),
                                                               ("the worker's", "worker_max_set_by")) if step.get(key)]
    return f" ({', '.join(said)})" if said else ""


def _at(where: dict[str, Any]) -> str:
    return f"{where['topic']}[{where['partition']}]@{where['offset']} (now {where['now']})"
