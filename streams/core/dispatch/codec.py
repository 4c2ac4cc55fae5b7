"""A namespace's state as JSON for the worker's tables, and back; the queues are rebuilt on load.

Two tables: `dispatch-state` holds the namespace's counters, caps, seqs and the names of its job
buckets (rewritten by every record, and small); `dispatch-jobs` holds each bucket's jobs under
`namespace/bucket` (`versioned.Versioned`), rewritten only when a record changed one of its jobs.

Only the jobs are stored, not the heaps: each queue follows from the jobs' status and `now` (one
run per worker's ready jobs, one per worker and expected start of those not yet due), and stale
entries (jobs finished or cancelled since they were queued) vanish on the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from immutables import Map

from streams.core.buckets import changed
from streams.core.dispatch.heap import of_sorted, push_run
from streams.core.dispatch.state import DispatchState, Job, Worker, bucket_of
from streams.core.versioned import Versioned


def dump(state: DispatchState) -> dict[str, Any]:
    return {
        "now": state.now, "max": state.max, "assigned": state.assigned,
        "caps": {name: w.max for name, w in sorted(state.workers.items()) if w.max is not None},
        "buckets": state.jobs.names(),
        "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items())),
        "applied": state.applied,
    }


def dump_bucket(state: DispatchState, name: str) -> list[list[Any]]:
    """One bucket's jobs in assignment order (an empty list once its last job is gone)."""
    # sorted by order alone, not first by uuid as `Versioned.bucket` would
    return [job.fields() for job in sorted(state.jobs.in_bucket(name), key=lambda j: j.order)]


def touched(before: DispatchState, after: DispatchState) -> frozenset[str]:
    """The buckets a record changed."""
    return changed(before.jobs, after.jobs)


def listed(entry: Mapping[str, Any] | None) -> list[str]:
    """The buckets a `dispatch-state` entry names."""
    return list(entry["buckets"]) if entry else []


def buckets(state: DispatchState) -> dict[str, list[list[Any]]]:
    """Every bucket's entry: the state as `load` takes it, with `dump`."""
    return {name: dump_bucket(state, name) for name in state.jobs.names()}


def load(data: Mapping[str, Any] | None, stored: Mapping[str, Iterable[list[Any]] | None] = Map()) -> DispatchState:
    if not data:
        return DispatchState()
    now = int(data["now"])
    workers = {name: Worker(max=int(cap)) for name, cap in data["caps"].items()}
    jobs = sorted((Job(*fields) for name in data["buckets"] for fields in stored.get(name) or ()),
                  key=lambda j: j.order)
    ready: dict[str, list[tuple[int, int, str]]] = {}
    later: dict[tuple[str, int], list[tuple[int, int, str]]] = {}  # (worker, expected start): an assign not yet due
    deadlines: list[tuple[int, int, int, str]] = []
    for job in jobs:  # in assignment order; each queue is sorted below
        worker = workers.get(job.worker) or Worker()
        if job.running:
            deadlines.append((job.deadline, job.order, job.attempt, job.uuid))
            worker = Worker(worker.max, worker.running + 1, worker.pending, worker.ready)
        else:
            entry = (job.acceptable_start, job.order, job.uuid)
            if job.expected_start <= now:
                ready.setdefault(job.worker, []).append(entry)
            else:
                later.setdefault((job.worker, job.expected_start), []).append(entry)
            worker = Worker(worker.max, worker.running, worker.pending + 1, worker.ready)
        workers[job.worker] = worker
    waiting = [(expected, run[0][1], name, tuple(sorted(run))) for (name, expected), run in later.items()]
    tops = []
    for name, worker in workers.items():
        if name in ready:
            queue = tuple(sorted(ready[name]))
            workers[name] = worker.with_ready(push_run(None, queue))
            if worker.has_room():
                tops.append((*queue[0], name))
    return DispatchState(offsets=dict(data["offsets"]), applied=int(data["applied"]), seqs=dict(data["seqs"]),
                         now=now, max=int(data["max"]), running=len(deadlines), assigned=int(data["assigned"]),
                         jobs=Versioned.of_items(bucket_of, ((job.uuid, job) for job in jobs)),
                         workers=Map(workers), waiting=of_sorted(sorted(waiting)),
                         deadlines=of_sorted(sorted(deadlines)), deadline_entries=len(deadlines),
                         tops=of_sorted(sorted(tops)))
