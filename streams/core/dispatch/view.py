"""A dispatcher namespace as an operator reads it (`tribunal dispatch state --namespace`, `explain`)."""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

from streams.core.dispatch.state import DispatchState, Job

_ENDS = ("JobFinished", "JobCancelled", "JobRetryScheduled", "JobFailedFinally")  # outcomes that end an attempt
SHOWN_JOBS = 1_000  # a state page lists at most this many jobs (running first, then by start order)


def _startable(job: Job, now: int) -> bool:
    return not job.running and job.expected_start <= now


def places(state: DispatchState, uuids: Iterable[str]) -> dict[str, int]:
    """The places in the startable queue (1: next to start) of those of `uuids` that are startable: one
    pass over the jobs, and a sort of only the jobs ahead of the last of them."""
    now, keys = state.now, {}
    for uuid in uuids:
        job = state.jobs.get(uuid)
        if job is not None and _startable(job, now):
            keys[uuid] = (job.acceptable_start, job.order)
    if not keys:
        return {}
    last = max(keys.values())
    startable = ((j.acceptable_start, j.order) for j in state.jobs.values() if _startable(j, now))
    ahead = sorted(key for key in startable if key <= last)
    return {uuid: bisect_left(ahead, key) + 1 for uuid, key in keys.items()}


def describe(namespace: str, state: DispatchState) -> dict[str, Any]:
    jobs = heapq.nsmallest(SHOWN_JOBS, state.jobs.values(),
                           key=lambda j: (not j.running, j.acceptable_start, j.order))
    return {**summary(namespace, state), "jobs": [job._asdict() for job in jobs], "jobs_shown": len(jobs)}


def summary(namespace: str, state: DispatchState) -> dict[str, Any]:
    """`describe` without the jobs listing, whose sort over every job the report need not pay after every record."""
    return {"namespace": namespace, "now": state.now, "max": state.max, "running": state.running,
            "pending": state.pending,
            "workers": {name: {"running": w.running, "max": w.max, "pending": w.pending}
                        for name, w in sorted(state.workers.items())},
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


def standing(state: DispatchState, uuid: str) -> dict[str, Any] | None:
    """Why a held job that is not running has not started, after a record (`explain --job`): its
    expected start not reached, or, startable, a cap that is full (after every record the fold starts
    all it may, so one of the two caps holds a startable job). Constant cost: its place in the
    queue, which costs a pass over the jobs, is `place`."""
    job = state.jobs.get(uuid)
    if job is None or job.running:
        return None
    worker = state.worker(job.worker)
    counts = {"namespace_running": state.running, "namespace_max": state.max,
              "worker_running": worker.running, "worker_max": worker.max}
    if job.expected_start > state.now:
        return {"status": "pending", "reason": "expected_start", **counts}
    reason = "namespace_cap" if state.running >= state.max else "worker_cap" if not worker.has_room() else "none"
    return {"status": "startable", "reason": reason, **counts}


def place(state: DispatchState, uuid: str) -> int | None:
    """A startable job's place among the startable jobs (1: next to start), None if it is not startable."""
    return places(state, (uuid,)).get(uuid)


def explain(before: DispatchState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """For each job the record started: where it stood in the queue and the caps it started under."""
    if not any(o["type"] == "JobStarted" for o in outputs):
        return {"now_before": before.now, "starts": []}
    queue = places(before, (o["uuid"] for o in outputs if o["type"] == "JobStarted"))
    starts: list[dict[str, Any]] = []
    namespace_running = before.running
    worker_running = {name: w.running for name, w in before.workers.items()}
    # the caps the starts were made under: a cap command's own (its health record says them), else unchanged
    health = next((o for o in outputs if o["type"] == "DispatcherHealth"), None)
    namespace_max = before.max if health is None else health["max"]
    worker_max = {name: w.max for name, w in before.workers.items()}
    if health is not None:
        worker_max.update((name, w["max"]) for name, w in health["workers"].items())
    for output in outputs:  # the counts each start saw: what ran before, less what this record ended first
        kind = output["type"]
        ended = before.jobs.get(output.get("uuid", ""))
        if kind in _ENDS and ended is not None and ended.running:
            namespace_running -= 1
            worker_running[ended.worker] = worker_running.get(ended.worker, 0) - 1
        if kind != "JobStarted":
            continue
        job = before.jobs.get(output["uuid"])
        starts.append({
            "uuid": output["uuid"], "attempt": output["attempt"], "started_at": output["started_at"],
            "expected_start": output["expected_start"], "acceptable_start": output["acceptable_start"],
            "startable_before": job is not None and job.expected_start <= before.now,
            "place_in_queue_before": queue.get(output["uuid"]),
            "namespace_running": namespace_running, "namespace_max": namespace_max,
            "worker_running": worker_running.get(output["worker"], 0), "worker_max": worker_max.get(output["worker"]),
        })
        namespace_running += 1
        worker_running[output["worker"]] = worker_running.get(output["worker"], 0) + 1
    return {"now_before": before.now, "starts": starts}


def counts_line(found: Mapping[str, Any]) -> str:
    """The namespace's and the worker's running counts against their caps, as `explain` prints them."""
    cap = "no cap" if found["worker_max"] is None else f"cap {found['worker_max']}"
    return (f"namespace ran {found['namespace_running']} of {found['namespace_max']}, worker ran "
            f"{found['worker_running']} ({cap})")


def because(start: Mapping[str, Any]) -> str:
    """Why a start could happen: the counts it started under and its place in the queue before."""
    place = start["place_in_queue_before"]
    return f"{counts_line(start)}; " + (f"it was #{place} in the startable queue" if place else
                                        "it was retried with this record" if start["attempt"] > 1 else
                                        "it became startable with this record")


def render(found: Mapping[str, Any]) -> list[str]:
    """`explain`'s text for a dispatcher record: each start, why then and not before."""
    lines = [f"now before  {found.get('now_before')}"]
    for s in found.get("starts", []):
        lines.append(f"started     {s['uuid']} attempt {s['attempt']} at {s['started_at']} "
                     f"(expected {s['expected_start']}, acceptable {s['acceptable_start']})")
        lines.append(f"  because   {because(s)}")
    for o in found.get("outputs", []):
        if o.get("type") not in ("JobStarted", "DispatcherHealth"):
            lines.append(f"outcome     {o['type']} {o.get('uuid') or o.get('uuids')}")
    return lines
