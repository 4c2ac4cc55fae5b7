"""A namespace's state as JSON for the worker's table, and back; the queues are rebuilt on load.

Only the jobs are stored, not the heaps: each queue follows from the jobs' status and `now` (one
run per worker's ready jobs, one per worker and expected start of those not yet due), and stale
entries (jobs finished or cancelled since they were queued) vanish on the way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from immutables import Map

from streams.core.dispatch.heap import push, push_run
from streams.core.dispatch.state import DispatchState, Job, Worker


def dump(state: DispatchState) -> dict[str, Any]:
    return {
        "now": state.now, "max": state.max, "assigned": state.assigned,
        "caps": {name: w.max for name, w in sorted(state.workers.items()) if w.max is not None},
        "jobs": [list(job) for job in sorted(state.jobs.values(), key=lambda j: j.order)],
        "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items())),
        "applied": state.applied,
    }


def load(data: Mapping[str, Any] | None) -> DispatchState:
    if not data:
        return DispatchState()
    now = int(data["now"])
    workers = {name: Worker(max=int(cap)) for name, cap in data["caps"].items()}
    jobs: dict[str, Job] = {}
    ready: dict[str, list[tuple[int, int, str]]] = {}
    later: dict[tuple[str, int], list[tuple[int, int, str]]] = {}  # (worker, expected start): an assign not yet due
    deadlines, running = None, 0
    for fields in data["jobs"]:  # in order: each list below is sorted by (acceptable start, order)
        job = Job(*fields)
        jobs[job.uuid] = job
        worker = workers.get(job.worker) or Worker()
        if job.running:
            running += 1
            deadlines = push(deadlines, (job.deadline, job.order, job.attempt, job.uuid))
            worker = worker._replace(running=worker.running + 1)
        else:
            entry = (job.acceptable_start, job.order, job.uuid)
            if job.expected_start <= now:
                ready.setdefault(job.worker, []).append(entry)
            else:
                later.setdefault((job.worker, job.expected_start), []).append(entry)
            worker = worker._replace(pending=worker.pending + 1)
        workers[job.worker] = worker
    waiting, tops = None, None
    for (name, expected), run in sorted(later.items()):
        waiting = push(waiting, (expected, run[0][1], name, tuple(sorted(run))))
    for name, worker in sorted(workers.items()):
        if name in ready:
            queue = tuple(sorted(ready[name]))
            workers[name] = worker._replace(ready=push_run(None, queue))
            if worker.has_room():
                tops = push(tops, (*queue[0], name))
    return DispatchState(offsets=dict(data["offsets"]), applied=int(data["applied"]), seqs=dict(data["seqs"]),
                         now=now, max=int(data["max"]), running=running, assigned=int(data["assigned"]),
                         jobs=Map(jobs), workers=Map(workers), waiting=waiting, deadlines=deadlines, tops=tops)
