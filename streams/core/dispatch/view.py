"""A dispatcher namespace as an operator reads it (`tribunal state --namespace`, `explain`)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from streams.core.dispatch.state import DispatchState, Job

_ENDS = ("JobFinished", "JobCancelled", "JobRetryScheduled", "JobFailedFinally")  # outcomes that end an attempt
SHOWN_JOBS = 1_000  # a state page lists at most this many jobs (running first, then by start order)


def _queue(state: DispatchState) -> list[Job]:
    """The pending jobs that may start now, in the order they will: earlier acceptable start first."""
    ready = [job for job in state.jobs.values() if not job.running and job.expected_start <= state.now]
    return sorted(ready, key=lambda j: (j.acceptable_start, j.order))


def describe(namespace: str, state: DispatchState) -> dict[str, Any]:
    jobs = heapq.nsmallest(SHOWN_JOBS, state.jobs.values(),
                           key=lambda j: (not j.running, j.acceptable_start, j.order))
    return {"namespace": namespace, "now": state.now, "max": state.max, "running": state.running,
            "pending": state.pending,
            "workers": {name: {"running": w.running, "max": w.max, "pending": w.pending}
                        for name, w in sorted(state.workers.items())},
            "jobs": [job._asdict() for job in jobs], "jobs_shown": len(jobs),
            "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items()))}


def job(state: DispatchState, uuid: str) -> dict[str, Any] | None:
    """One job still held, with its status: `pending` (its expected start has not come), `startable`
    (waiting for a slot) or `running`; finished, failed and cancelled jobs have left the state (see
    job-outcomes)."""
    found = state.jobs.get(uuid)
    if found is None:
        return None
    status = "running" if found.running else "pending" if found.expected_start > state.now else "startable"
    return {**found._asdict(), "status": status, "now": state.now}


def explain(before: DispatchState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """For each job the record started: where it stood in the queue and the caps it started under."""
    if not any(o["type"] == "JobStarted" for o in outputs):
        return {"now_before": before.now, "starts": []}
    queue = {job.uuid: place for place, job in enumerate(_queue(before), 1)}
    starts: list[dict[str, Any]] = []
    namespace_running = before.running
    worker_running = {name: w.running for name, w in before.workers.items()}
    for output in outputs:  # the counts each start saw: what ran before, less what this record ended first
        kind = output["type"]
        ended = before.jobs.get(output.get("uuid", ""))
        if kind in _ENDS and ended is not None and ended.running:
            namespace_running -= 1
            worker_running[ended.worker] = worker_running.get(ended.worker, 0) - 1
        if kind != "JobStarted":
            continue
        job = before.jobs.get(output["uuid"])
        worker = before.worker(output["worker"])
        starts.append({
            "uuid": output["uuid"], "attempt": output["attempt"], "started_at": output["started_at"],
            "expected_start": job.expected_start if job else None,
            "acceptable_start": job.acceptable_start if job else None,
            "startable_before": job is not None and job.expected_start <= before.now,
            "place_in_queue_before": queue.get(output["uuid"]),
            "namespace_running": namespace_running, "namespace_max": before.max,
            "worker_running": worker_running.get(output["worker"], 0), "worker_max": worker.max,
        })
        namespace_running += 1
        worker_running[output["worker"]] = worker_running.get(output["worker"], 0) + 1
    return {"now_before": before.now, "starts": starts}


def render(found: Mapping[str, Any]) -> list[str]:
    """`explain`'s text for a dispatcher record: each start, why then and not before."""
    if "rejected" in found:
        return []
    lines = [f"now before  {found.get('now_before')}"]
    for s in found.get("starts", []):
        cap = "no cap" if s["worker_max"] is None else f"cap {s['worker_max']}"
        place = s["place_in_queue_before"]
        lines.append(f"started     {s['uuid']} attempt {s['attempt']} at {s['started_at']} "
                     f"(expected {s['expected_start']}, acceptable {s['acceptable_start']})")
        lines.append(f"  because   namespace ran {s['namespace_running']} of {s['namespace_max']}, "
                     f"worker ran {s['worker_running']} ({cap}); "
                     + (f"it was #{place} in the startable queue" if place else
                        "it became startable with this record"))
    for o in found.get("outputs", []):
        if o.get("type") not in ("JobStarted", "DispatcherHealth"):
            lines.append(f"outcome     {o['type']} {o.get('uuid') or o.get('uuids')}")
    return lines
