"""The dispatcher's rules: the clock's moves (timeouts, assigns whose start came), starts under the caps, the ends
of attempts, and the health record. Every command and Tick comes down to these (`commands`).

Cost: a command or Tick that starts or ends k jobs costs about k log n in the n jobs pending
(persistent maps and heaps, `state`): the next job to start is the top of `tops`, the merge of the
workers' queues, so no pass over the workers is made except for the health record (Ticks, caps,
assigns).
"""

from __future__ import annotations

from immutables import Map

from streams.core.dispatch.emission import DISPATCHER_HEALTH, JOB_STARTS, Out
from streams.core.dispatch.heap import Heap, advance, entries, of_sorted, pop, push, push_run
from streams.core.dispatch.state import DispatchState, Job, Jobs, Worker, job_of

STALE_DEADLINES = 64  # the deadlines queue is rebuilt when its stale entries outnumber the live ones by this


def advanced(state: DispatchState, now: int, out: Out) -> DispatchState:
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
            state = end_attempt(_with_deadlines(state, deadlines, count), job, out,
                                 f"timed out after {job.timeout_ms} ms")
    return _startable(_with_deadlines(state, deadlines, count))


def _with_deadlines(state: DispatchState, deadlines: Heap, count: int) -> DispatchState:
    changed = state.copy()
    changed.deadlines, changed.deadline_entries = deadlines, count
    return changed


def put(state: DispatchState, name: str, worker: Worker) -> DispatchState:
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


def forget(state: DispatchState, job: Job) -> DispatchState:
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


def end_attempt(state: DispatchState, job: Job, out: Out, error: str) -> DispatchState:
    """The running attempt of `job` failed: retried in its old place while attempts remain, else failed for good."""
    if job.attempt > job.max_retries:
        state = forget(state, job)
        out.outcome("JobFailedFinally", job, state.now, final=True, error=error)
        return state
    worker = state.worker(job.worker)
    worker = Worker(worker.max, worker.running - 1, worker.pending + 1,
                    push_run(worker.ready, ((job.acceptable_start, job.order, job.uuid),)))
    retry = Job(job.uuid, job.external_id, job.info, job.worker, job.expected_start, job.acceptable_start, job.order,
                job.max_retries, job.timeout_ms, job.attempt, False, 0, 0, job.assigned_by)
    ended = state.copy()
    ended.jobs, ended.running = state.jobs.set(retry.uuid, retry), state.running - 1
    state = put(ended, job.worker, worker)
    out.outcome("JobRetryScheduled", job, state.now, final=False, error=error)
    return state


def _startable(state: DispatchState) -> DispatchState:
    """Move the assigns whose expected start has come from `waiting` to their workers' ready queues."""
    waiting, now = state.waiting, state.now
    while waiting is not None and waiting.item[0] <= now:
        _, _, name, run = waiting.item
        waiting = pop(waiting)
        worker = state.worker(name)
        state = put(state, name, worker.with_ready(push_run(worker.ready, run)))
    if waiting is not state.waiting:
        state = state.copy()
        state.waiting = waiting
    return state


def ready_top(jobs: Jobs, heap: Heap) -> Heap:
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
               job.max_retries, job.timeout_ms, job.attempt + 1, True, now, now + job.timeout_ms, job.assigned_by)


def schedule(state: DispatchState, out: Out) -> DispatchState:
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
            cleaned = worker.with_ready(ready_top(jobs, advance(worker.ready)))
            workers, tops = _offered(workers, tops, name, cleaned, worker)
            continue
        job = _started(job, now)
        jobs, running, entries = jobs.set(uuid, job), running + 1, entries + 1
        deadlines = push(deadlines, (job.deadline, order, job.attempt, uuid))
        busier = Worker(worker.max, worker.running + 1, worker.pending - 1, ready_top(jobs, advance(worker.ready)))
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


def health(state: DispatchState, out: Out) -> DispatchState:
    """The namespace's health record; the ready queues it had to clean of dead entries are kept clean."""
    workers, oldest = {}, None
    for name in sorted(state.workers):
        worker = state.workers[name]
        workers[name] = {"running": worker.running, "max": worker.max, "pending": worker.pending}
        ready = ready_top(state.jobs, worker.ready)
        if ready is not worker.ready:
            state = put(state, name, worker.with_ready(ready))
        if ready is not None and (oldest is None or ready.item[0] < oldest):
            oldest = ready.item[0]
    out.emit(DISPATCHER_HEALTH, {"type": "DispatcherHealth", "namespace": out.namespace, "now": state.now,
                                 "running": state.running, "max": state.max, "pending": state.pending,
                                 "oldest_lateness_ms": max(0, state.now - oldest) if oldest is not None else 0,
                                 "workers": workers})
    return state
