"""A namespace's state as JSON for the worker's table, and back; the queues are rebuilt on load.

Only the jobs are stored, not the heaps: each queue follows from the jobs' status and `now`, and
stale entries (jobs finished or cancelled since they were queued) vanish on the way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyrsistent import pmap

from streams.core.dispatch.heap import push
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
    jobs, waiting, deadlines, running = {}, None, None, 0
    for fields in data["jobs"]:
        job = Job(*fields)
        jobs[job.uuid] = job
        worker = workers.get(job.worker) or Worker()
        if job.running:
            running += 1
            deadlines = push(deadlines, (job.deadline, job.order, job.attempt, job.uuid))
            worker = worker._replace(running=worker.running + 1)
        elif job.expected_start <= now:
            worker = worker._replace(pending=worker.pending + 1,
                                     ready=push(worker.ready, (job.acceptable_start, job.order, job.uuid)))
        else:
            waiting = push(waiting, (job.expected_start, job.order, job.uuid))
            worker = worker._replace(pending=worker.pending + 1)
        workers[job.worker] = worker
    return DispatchState(offsets=dict(data["offsets"]), applied=int(data["applied"]), seqs=dict(data["seqs"]),
                         now=now, max=int(data["max"]), running=running, assigned=int(data["assigned"]),
                         jobs=pmap(jobs), workers=pmap(workers), waiting=waiting, deadlines=deadlines)
