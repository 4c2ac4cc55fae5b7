"""The dispatcher (SPEC §5, seed 002) folded from the log: the fold's entry point and its rules.

Per namespace: a pending job may start once `now >= expected_start`; among startable jobs the
earlier acceptable start goes first, ties by assignment order; a job starts only while the
namespace runs fewer than its cap and its worker fewer than the worker's (the seed's SQL has `>`
there, a typo not reproduced). A running attempt that reaches its deadline times out; a timed-out
or failed job is retried while attempts <= max_retries, keeping its place by acceptable start, and
fails for good after that.

Time: the namespace's `now` is the latest timestamp of its records, commands and `Tick`s alike
(`source.event_time`: the broker's append time, since those topics are `LogAppendTime`), never a
clock of the worker's, so replay starts every job at the same `now`. A command dates what it causes:
after an idle spell in which no Tick came, an assign starts its jobs at its own time, not at the
last Tick's, and their timeouts count from there. A Tick only moves the clock between commands (the
timeouts, the assigns whose start came); one at or before `now` changes nothing, so two tickers do
no harm. A Tick's `now` field is what the ticker read; the broker's stamp is what counts.

Cost: a command or Tick that starts or ends k jobs costs about k log n in the n jobs pending
(persistent maps and heaps, `state`): the next job to start is the top of `tops`, the merge of the
workers' queues, so no pass over the workers is made except for the health record (Ticks, caps,
assigns).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from immutables import Map
from pydantic import TypeAdapter, ValidationError

from schemas import dispatch as records
from streams.core.admission import offsets_after, reject
from streams.core.deadletter import Rejected
from streams.core.dispatch.heap import Heap, advance, entries, of_sorted, pop, push, push_run
from streams.core.dispatch.reports import Report, of_model, read
from streams.core.dispatch.state import DispatchState, Job, Jobs, Worker, job_of
from streams.core.intake import error_text, readable
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, cause_of, event_time, named_key, record_key

DISPATCH_COMMANDS = "dispatch-commands"
TICKS = "ticks"
INPUTS: tuple[str, ...] = (DISPATCH_COMMANDS, TICKS)
JOB_STARTS = "job-starts"
JOB_OUTCOMES = "job-outcomes"
DISPATCHER_HEALTH = "dispatcher-health"
OUTPUTS: tuple[str, ...] = (JOB_STARTS, JOB_OUTCOMES, DISPATCHER_HEALTH)

STALE_DEADLINES = 64  # the deadlines queue is rebuilt when its stale entries outnumber the live ones by this
_COMMAND: TypeAdapter[Any] = TypeAdapter(records.DispatchCommand)
_TICK: TypeAdapter[records.Tick] = TypeAdapter(records.Tick)


def key_of(record: SourceRecord, topic: str = "") -> str:
    """The namespace a record belongs to: the one its value names, else its key."""
    return named_key(record, "namespace") or record_key(record)


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


def apply(state: DispatchState, record: SourceRecord, topic: str) -> tuple[DispatchState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its namespace's state."""
    offsets = offsets_after(state.offsets, record)  # `admission.admit`, on this state: a copy is native
    if offsets is None:
        return state, []  # a redelivery after a crash
    admitted = state.copy()
    admitted.offsets, admitted.applied = offsets, state.applied + 1
    if admitted.jobs.touched:  # `touched` names the job buckets this record changes (`buckets.Buckets`)
        admitted.jobs = admitted.jobs.untouched()
    try:
        command = _parse(record, topic)
    except Rejected as rejection:
        return reject(admitted, record, rejection, key_of(record, topic), admitted=True)
    out = Out(record, command.namespace, admitted)  # the namespace `key_of` gives, without parsing again
    # A command is dated as a Tick is: what came due by its time happens first, also when it is refused (a
    # finish that arrives after the deadline finds the attempt timed out, as a Tick between them would have).
    dated = admitted if isinstance(command, records.Tick) else _advanced(admitted, event_time(record), out)
    try:
        if isinstance(command, Report):
            after = _REPORTS[command.type](dated, command, out)
        else:
            after = _HANDLERS[type(command)](dated, command, out)
    except Rejected as rejection:  # raised before the handler emits or changes anything
        if dated is not admitted:
            dated = _schedule(dated, out)  # a timed-out attempt's retry, an assign whose start came
        if out.seqs is not None:
            dated = _numbered(dated, out.seqs)
        after, dead = reject(dated, record, rejection, command.namespace, admitted=True)
        return after, [*out.emits, *dead]
    if out.seqs is not None:
        after = _numbered(after, out.seqs)
    return after, out.emits


def _numbered(state: DispatchState, seqs: dict[str, int]) -> DispatchState:
    numbered = state.copy()
    numbered.seqs = seqs
    return numbered


def _parse(record: SourceRecord, topic: str) -> Any:
    """The command (a `Report` for a report on one job), or `Rejected`."""
    value = readable(record)
    report = read(value) if topic == DISPATCH_COMMANDS else None
    if report is not None:
        if bool(record.key) and record_key(record) != report.namespace:
            raise Rejected("namespace_mismatch", f"{report.type} names namespace {report.namespace!r} but its key "
                                                 f"is {record_key(record)!r}")
        return report
    adapter = _COMMAND if topic == DISPATCH_COMMANDS else _TICK if topic == TICKS else None
    if adapter is None:
        raise Rejected("unknown_topic", f"the dispatcher does not read topic {topic!r}")
    try:
        command = adapter.validate_json(value)
    except ValidationError as error:
        what = "tick" if topic == TICKS else "command"
        raise Rejected("bad_command", f"invalid {what}: {error_text(error)}") from None
    if bool(record.key) and record_key(record) != command.namespace:
        raise Rejected("namespace_mismatch",
                       f"{command.type} names namespace {command.namespace!r} but its key is {record_key(record)!r}")
    if isinstance(command, records.JobFinished | records.JobFailed | records.JobCancelled):
        return of_model(command)
    return command


# -- commands -------------------------------------------------------------------------------------

def _max_threads(state: DispatchState, command: records.MaxThreadsSet, out: Out) -> DispatchState:
    capped = state.copy()
    capped.max = command.max
    return _health(_schedule(capped, out), out)


def _worker_max(state: DispatchState, command: records.WorkerMaxSet, out: Out) -> DispatchState:
    old = state.worker(command.worker)
    state = _put(state, command.worker, Worker(command.max, old.running, old.pending, old.ready))
    return _health(_schedule(state, out), out)


def _assign(state: DispatchState, command: records.JobsAssigned, out: Out) -> DispatchState:
    worker, record, first = state.worker(command.worker), out.record, state.assigned
    run, jobs = [], []  # the jobs in start order already (acceptable starts rise with the order): one queue entry
    for i, (spec, acceptable) in enumerate(zip(command.jobs, acceptable_starts(command.start, command.end,
                                                                             len(command.jobs)), strict=True)):
        uuid = job_uuid(DISPATCH_COMMANDS, record.partition, record.offset, i)
        jobs.append(Job(uuid, spec.external_id, spec.info, command.worker, command.start, acceptable, first + i,
                        spec.max_retries, spec.timeout_ms))
        run.append((acceptable, first + i, uuid))
    state = state.copy()
    state.jobs, state.assigned = state.jobs.added((job.uuid, job) for job in jobs), first + len(jobs)
    worker = Worker(worker.max, worker.running, worker.pending + len(jobs), worker.ready)
    if command.start <= state.now:
        worker = worker.with_ready(push_run(worker.ready, tuple(run)))
    else:
        state.waiting = push(state.waiting, (command.start, first, command.worker, tuple(run)))
    state = _put(state, command.worker, worker)
    out.emit(JOB_OUTCOMES, {"type": "JobsAccepted", "namespace": out.namespace, "worker": command.worker,
                            "request_id": command.request_id, "uuids": [job.uuid for job in jobs]})
    return _health(_schedule(state, out), out)


def _finished(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = _running(state, command.uuid, "finish", command.attempt)
    state = _forget(state, job)
    out.outcome("JobFinished", job, state.now, final=True)
    return _schedule(state, out)


def _failed(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = _running(state, command.uuid, "fail", command.attempt)
    return _schedule(_end_attempt(state, job, out, command.error), out)


def _cancelled(state: DispatchState, command: Report, out: Out) -> DispatchState:
    job = job_of(state.jobs, command.uuid)
    if job is None:
        raise Rejected("unknown_job", f"no pending or running job {command.uuid!r} in namespace {out.namespace!r}")
    state = _forget(state, job)
    out.outcome("JobCancelled", job, state.now, final=True)
    return _schedule(state, out)


def _tick(state: DispatchState, tick: records.Tick, out: Out) -> DispatchState:
    at = event_time(out.record)
    if at <= state.now:
        return state  # an older or repeated tick (a second ticker, a replayed one): nothing happens
    return _health(_schedule(_advanced(state, at, out), out), out)


_HANDLERS: dict[type, Callable[[DispatchState, Any, Out], DispatchState]] = {
    records.MaxThreadsSet: _max_threads, records.WorkerMaxSet: _worker_max, records.JobsAssigned: _assign,
    records.Tick: _tick,
}
_REPORTS: dict[str, Callable[[DispatchState, Report, Out], DispatchState]] = {
    "JobFinished": _finished, "JobFailed": _failed, "JobCancelled": _cancelled}


# -- the rules ------------------------------------------------------------------------------------

def _advanced(state: DispatchState, now: int, out: Out) -> DispatchState:
    """The namespace's clock moved to `now`: the attempts whose deadline came time out (first: they free slots)
    and the assigns whose expected start came join their workers' ready queues. Nothing starts here."""
    if now <= state.now:
        return state
    state = state.copy()
    state.now = now
    deadlines, count = state.deadlines, state.deadline_entries
    while deadlines is not None and deadlines.item[0] <= now:  # timeouts first: they free slots
        _, _, attempt, uuid = deadlines.item
        deadlines, count = pop(deadlines), count - 1
        job = job_of(state.jobs, uuid)
        if job is not None and job.running and job.attempt == attempt:
            out.outcome("JobTimedOut", job, now, final=False)
            state = _end_attempt(_with_deadlines(state, deadlines, count), job, out,
                                 f"timed out after {job.timeout_ms} ms")
    return _startable(_with_deadlines(state, deadlines, count))


def _with_deadlines(state: DispatchState, deadlines: Heap, count: int) -> DispatchState:
    changed = state.copy()
    changed.deadlines, changed.deadline_entries = deadlines, count
    return changed


def _running(state: DispatchState, uuid: str, verb: str, attempt: int | None) -> Job:
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


def _put(state: DispatchState, name: str, worker: Worker) -> DispatchState:
    """`state` with `worker` (see `_offered`): the cold paths' way, one lookup of the worker it replaces."""
    changed = state.copy()
    changed.workers, changed.tops = _offered(state.workers, state.tops, name, worker, state.workers.get(name))
    return changed


def _offered(workers: Map[str, Worker], tops: Heap, name: str, worker: Worker,
             old: Worker | None) -> tuple[Map[str, Worker], Heap]:
    """`workers` with `worker` in place of `old` (None: it had none), and `tops` kept: a worker that has room
    and whose queue's top is new (or whose room is) offers its top. A worker with no cap, nothing running and
    nothing pending is not kept.

    Takes the parts of the state, not the state, and the worker it replaces, which the caller has looked up
    already: the hot path (a finish and the start it makes room for) builds one state a command, not one a
    change."""
    if worker.max is None and not worker.running and not worker.pending:
        return (workers if old is None else workers.delete(name)), tops
    ready = worker.ready
    if ready is not None and worker.has_room() and (
            old is None or old.ready is None or old.ready.item is not ready.item or not old.has_room()):
        acceptable, order, uuid, _, _ = ready.item
        tops = push(tops, (acceptable, order, uuid, name))
    return workers.set(name, worker), tops


def _forget(state: DispatchState, job: Job) -> DispatchState:
    """`state` without `job` (finished, cancelled, or failed for good); its queue entries go stale."""
    old = state.workers.get(job.worker)
    worker = old or Worker()
    running = state.running
    if job.running:
        worker, running = Worker(worker.max, worker.running - 1, worker.pending, worker.ready), running - 1
    else:
        worker = Worker(worker.max, worker.running, worker.pending - 1, worker.ready)
    changed = state.copy()
    changed.workers, changed.tops = _offered(state.workers, state.tops, job.worker, worker, old)
    changed.jobs, changed.running = state.jobs.delete(job.uuid), running
    return changed


def _end_attempt(state: DispatchState, job: Job, out: Out, error: str) -> DispatchState:
    """The running attempt of `job` failed: retried in its old place while attempts remain, else failed for good."""
    if job.attempt > job.max_retries:
        state = _forget(state, job)
        out.outcome("JobFailedFinally", job, state.now, final=True, error=error)
        return state
    worker = state.worker(job.worker)
    worker = Worker(worker.max, worker.running - 1, worker.pending + 1,
                    push_run(worker.ready, ((job.acceptable_start, job.order, job.uuid),)))
    retry = Job(job.uuid, job.external_id, job.info, job.worker, job.expected_start, job.acceptable_start, job.order,
                job.max_retries, job.timeout_ms, job.attempt)
    ended = state.copy()
    ended.jobs, ended.running = state.jobs.set(retry.uuid, retry), state.running - 1
    state = _put(ended, job.worker, worker)
    out.outcome("JobRetryScheduled", job, state.now, final=False, error=error)
    return state


def _startable(state: DispatchState) -> DispatchState:
    """Move the assigns whose expected start has come from `waiting` to their workers' ready queues."""
    waiting, now = state.waiting, state.now
    while waiting is not None and waiting.item[0] <= now:
        _, _, name, run = waiting.item
        waiting = pop(waiting)
        worker = state.worker(name)
        state = _put(state, name, worker.with_ready(push_run(worker.ready, run)))
    if waiting is not state.waiting:
        state = state.copy()
        state.waiting = waiting
    return state


def _ready(jobs: Jobs, heap: Heap) -> Heap:
    """`heap` without the stale entries at its top."""
    while heap is not None:
        _, order, uuid, _, _ = heap.item
        job = job_of(jobs, uuid)
        if job is not None and not job.running and job.order == order:
            return heap
        heap = advance(heap)
    return None


def _started(job: Job, now: int) -> Job:
    """`job`'s next attempt, running from `now` (built whole: a `_replace` costs twice as much)."""
    return Job(job.uuid, job.external_id, job.info, job.worker, job.expected_start, job.acceptable_start, job.order,
               job.max_retries, job.timeout_ms, job.attempt + 1, True, now, now + job.timeout_ms)


def _schedule(state: DispatchState, out: Out) -> DispatchState:
    """Start startable jobs, earliest acceptable start first, while the namespace's and their worker's caps allow.

    The next candidate is the top of `tops` (each worker with room offers its queue's top), so a start looks at
    the one worker it starts a job of. The parts a start changes are kept in locals and the state is built once
    at the end: a state per start cost more than the start."""
    tops, now, running, cap = state.tops, state.now, state.running, state.max
    jobs, workers, deadlines, entries = state.jobs, state.workers, state.deadlines, state.deadline_entries
    while tops is not None and running < cap:
        _, order, uuid, name = tops.item
        tops = pop(tops)
        worker = workers.get(name)
        if worker is None or worker.ready is None or not worker.has_room():
            continue  # the worker offers again when it has room
        top = worker.ready.item
        if top[2] != uuid or top[1] != order:
            continue  # an older offer: the worker's current top has its own entry
        job = job_of(jobs, uuid)
        if job is None or job.running or job.order != order:  # a dead entry at the worker's top: offer the next
            cleaned = worker.with_ready(_ready(jobs, advance(worker.ready)))
            workers, tops = _offered(workers, tops, name, cleaned, worker)
            continue
        job = _started(job, now)
        jobs, running, entries = jobs.set(uuid, job), running + 1, entries + 1
        deadlines = push(deadlines, (job.deadline, order, job.attempt, uuid))
        busier = Worker(worker.max, worker.running + 1, worker.pending - 1, _ready(jobs, advance(worker.ready)))
        workers, tops = _offered(workers, tops, name, busier, worker)
        out.emit(JOB_STARTS, {"type": "JobStarted", "namespace": out.namespace, "uuid": uuid,
                              "external_id": job.external_id, "worker": name, "info": job.info,
                              "attempt": job.attempt, "started_at": now, "deadline": job.deadline,
                              "expected_start": job.expected_start, "acceptable_start": job.acceptable_start})
    if tops is not state.tops:
        state = state.copy()
        state.jobs, state.running, state.workers, state.tops = jobs, running, workers, tops
        state.deadlines, state.deadline_entries = deadlines, entries
    if entries > 2 * running + STALE_DEADLINES:
        state = _without_stale_deadlines(state)
    return state


def _without_stale_deadlines(state: DispatchState) -> DispatchState:
    """The deadlines queue rebuilt from its live entries. An attempt that ends before its deadline leaves
    its entry behind until the deadline passes (an hour's timeout at 1,000 starts a second would hold
    3.6 million); rebuilt once the stale entries outnumber the live ones by `STALE_DEADLINES`, in one
    sort of the live ones (O(r log r) in C, r the jobs running; amortised over the r + 64 ends before)."""
    jobs, live = state.jobs, []
    for entry in entries(state.deadlines):
        _, _, attempt, uuid = entry
        job = job_of(jobs, uuid)
        if job is not None and job.running and job.attempt == attempt:
            live.append(entry)
    live.sort()
    return _with_deadlines(state, of_sorted(live), len(live))


def _health(state: DispatchState, out: Out) -> DispatchState:
    """The namespace's health record; the ready queues it had to clean of dead entries are kept clean."""
    workers, oldest = {}, None
    for name in sorted(state.workers):
        worker = state.workers[name]
        workers[name] = {"running": worker.running, "max": worker.max, "pending": worker.pending}
        ready = _ready(state.jobs, worker.ready)
        if ready is not worker.ready:
            state = _put(state, name, worker.with_ready(ready))
        if ready is not None and (oldest is None or ready.item[0] < oldest):
            oldest = ready.item[0]
    out.emit(DISPATCHER_HEALTH, {"type": "DispatcherHealth", "namespace": out.namespace, "now": state.now,
                                 "running": state.running, "max": state.max, "pending": state.pending,
                                 "oldest_lateness_ms": max(0, state.now - oldest) if oldest is not None else 0,
                                 "workers": workers})
    return state
