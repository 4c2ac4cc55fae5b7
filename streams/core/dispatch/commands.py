"""The dispatcher's commands (SPEC §5, the seed's API): caps, assigns, a job's finish, failure or cancel, and Ticks;
each a change of the state followed by the rules (`rules`) it sets off."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from schemas import dispatch as records
from streams.core.deadletter import Rejected
from streams.core.dispatch.emission import JOB_OUTCOMES, Out
from streams.core.dispatch.heap import push, push_run
from streams.core.dispatch.reports import Report
from streams.core.dispatch.rules import advanced, end_attempt, forget, health, put, schedule
from streams.core.dispatch.state import DispatchState, Job, Worker, job_of
from streams.core.source import event_time

DISPATCH_COMMANDS = "dispatch-commands"


def job_uuid(topic: str, partition: int, offset: int, index: int) -> str:
    """A version-5-style uuid made from the assign's coordinates: replay makes the same ones."""
    raw = bytearray(hashlib.sha1(f"tribunal:{topic}:{partition}:{offset}:{index}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def acceptable_starts(start: int, end: int, n: int) -> list[int]:
    """n points spread evenly over [start, end], first at start, last at end (one job: start)."""
    if n == 1:
        return [start]
    return [start + (end - start) * i // (n - 1) for i in range(n)]


def _max_threads(state: DispatchState, command: records.MaxThreadsSet, out: Out) -> DispatchState:
    capped = state.copy()
    capped.max = command.max
    return health(schedule(capped, out), out)


def _worker_max(state: DispatchState, command: records.WorkerMaxSet, out: Out) -> DispatchState:
    old = state.worker(command.worker)
    state = put(state, command.worker, Worker(command.max, old.running, old.pending, old.ready))
    return health(schedule(state, out), out)


def _assign(state: DispatchState, command: records.JobsAssigned, out: Out) -> DispatchState:
    worker, record, first = state.worker(command.worker), out.record, state.assigned
    run, jobs = [], []  # the jobs in start order already (acceptable starts rise with the order): one queue entry
    for i, (spec, acceptable) in enumerate(zip(command.jobs, acceptable_starts(command.start, command.end,
                                                                             len(command.jobs)), strict=True)):
        uuid = job_uuid(DISPATCH_COMMANDS, record.partition, record.offset, i)
        jobs.append(Job(uuid, spec.external_id, spec.info, command.worker, command.start, acceptable, first + i,
                        spec.max_retries, spec.timeout_ms, 0, False, 0, 0, command.principal))
        run.append((acceptable, first + i, uuid))
    state = state.copy()
    state.jobs, state.assigned = state.jobs.added((job.uuid, job) for job in jobs), first + len(jobs)
    worker = Worker(worker.max, worker.running, worker.pending + len(jobs), worker.ready)
    if command.start <= state.now:
        worker = worker.with_ready(push_run(worker.ready, tuple(run)))
    else:
        state.waiting = push(state.waiting, (command.start, first, command.worker, tuple(run)))
    state = put(state, command.worker, worker)
    out.emit(JOB_OUTCOMES, {"type": "JobsAccepted", "namespace": out.namespace, "worker": command.worker,
                            "request_id": command.request_id, "uuids": [job.uuid for job in jobs]})
    return health(schedule(state, out), out)


def _finished(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = running_job(state, command.uuid, "finish", command.attempt)
    state = forget(state, job)
    out.outcome("JobFinished", job, state.now, final=True)
    return schedule(state, out)


def _failed(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = running_job(state, command.uuid, "fail", command.attempt)
    return schedule(end_attempt(state, job, out, command.error), out)


def _cancelled(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = job_of(state.jobs, command.uuid)
    if job is None:
        raise Rejected("unknown_job", f"no pending or running job {command.uuid!r} in namespace {out.namespace!r}")
    state = forget(state, job)
    out.outcome("JobCancelled", job, state.now, final=True)
    return schedule(state, out)


def _tick(state: DispatchState, tick: records.Tick, out: Out) -> DispatchState:
    at = event_time(out.record)
    if at <= state.now:
        return state  # an older or repeated tick (a second ticker, a replayed one): nothing happens
    return health(schedule(advanced(state, at, out), out), out)


HANDLERS: dict[type, Callable[[DispatchState, Any, Out], DispatchState]] = {
    records.MaxThreadsSet: _max_threads, records.WorkerMaxSet: _worker_max, records.JobsAssigned: _assign,
    records.Tick: _tick,
}
REPORTS: dict[str, Callable[[DispatchState, Report, Out], DispatchState]] = {
    "JobFinished": _finished, "JobFailed": _failed, "JobCancelled": _cancelled}


def running_job(state: DispatchState, uuid: str, verb: str, attempt: int | None) -> Job:
    """The job whose running attempt a finish or failure ends: `attempt`, when the report names one.

    A report that names an attempt which ended already (timed out, say, and retried) is late: applying it to
    the retry would end an attempt the tenant is still running, and dead-letter the retry's own report."""
    job = job_of(state.jobs, uuid)
    if job is None:
        raise Rejected("unknown_job", f"cannot {verb} {uuid!r}: no such pending or running job")
    if attempt is not None and (attempt < job.attempt or (attempt == job.attempt and not job.running)):
        now = f"attempt {job.attempt} is running" if job.running else "it waits for its next attempt"
        raise Rejected("late_report", f"cannot {verb} attempt {attempt} of {uuid!r}: that attempt ended "
                                      f"already, and {now}; nothing was applied")
    if attempt is not None and attempt > job.attempt:
        raise Rejected("unknown_attempt", f"cannot {verb} attempt {attempt} of {uuid!r}: only {job.attempt} "
                                          "started so far")
    if not job.running:
        raise Rejected("not_running", f"cannot {verb} {uuid!r}: it is pending, not running")
    return job
