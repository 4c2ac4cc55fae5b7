"""Per-record cost of the rejection-limits fold: 10 / 100 / 1,000 schedulers, 100,000 jobs.

The group starts with every job owned (spread over the schedulers), loaded as the worker loads it.
Then a seeded mix that a busy
group sees: a job moving (released, then acquired by another scheduler), a job created and later
deleted (K moves, so N may move for every scheduler sharing an n), a scheduler put offline and
back. Each record goes through `groups.apply` from raw bytes (validation, fold, every output
record) and its outputs are encoded to bytes, as the worker would send them. A snapshot of the
whole group (100,000 jobs compared) is timed apart. Medians of --repeat runs, with the garbage
collector's young-generation threshold the worker sets (10,000) and, for comparison, CPython's
default (700).
Run: `.venv/bin/python bench/groups_fold.py [--jobs 100000] [--records 20000]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time

from machine import describe  # type: ignore[import-not-found]
from pyrsistent import pmap

from streams.collector import fewer_collections
from streams.core import groups
from streams.core.source import SourceRecord


def event_record(offset: int, event: dict[str, object], topic: str) -> SourceRecord:
    return SourceRecord(topic, 0, offset, offset, b"g", json.dumps({"group": "g", **event}).encode())


def setup(schedulers: int, jobs: int) -> tuple[groups.GroupState, list[str]]:
    """A group with every job owned, built as a worker would load it from its table."""
    ids = [f"s{i:04d}" for i in range(schedulers)]
    state = groups.load({
        "members": {sid: [f"{sid}:7000", 1 + i % 3, jobs] for i, sid in enumerate(ids)}, "offline": [],
        "owners": {f"j{j:06d}": ids[j % len(ids)] for j in range(jobs)}, "figures": {}, "offers": {},
        "capacity_ok": True, "seqs": {}, "offsets": {}})
    return state._replace(figures=pmap({sid: state.figures_of(sid) for sid in ids})), ids


def workload(ids: list[str], jobs: int, records: int, seed: int = 11) -> list[tuple[str, dict[str, object]]]:
    rng = random.Random(seed)
    owner = {f"j{j:06d}": ids[j % len(ids)] for j in range(jobs)}
    out: list[tuple[str, dict[str, object]]] = []
    extra = 0
    while len(out) < records:
        kind = rng.random()
        if kind < 0.7:
            job = f"j{rng.randrange(jobs):06d}"
            new = ids[rng.randrange(len(ids))]
            out.append((groups.JOB_EVENTS, {"type": "JobReleased", "job": job, "scheduler": owner[job]}))
            out.append((groups.JOB_EVENTS, {"type": "JobAcquired", "job": job, "scheduler": new}))
            owner[job] = new
        elif kind < 0.95:
            job = f"x{extra:06d}"
            extra += 1
            out.append((groups.JOB_EVENTS, {"type": "JobCreated", "job": job}))
            out.append((groups.JOB_EVENTS, {"type": "JobDeleted", "job": job}))
        else:
            sid = ids[rng.randrange(len(ids))]
            out.append((groups.SCHEDULER_EVENTS, {"type": "SchedulerOfflineRequested", "scheduler": sid}))
            out.append((groups.SCHEDULER_EVENTS, {"type": "SchedulerOnlineRequested", "scheduler": sid}))
    return out[:records]


def run(state: groups.GroupState, log: list[SourceRecord]) -> tuple[float, int]:
    started = time.perf_counter()
    outputs = 0
    for record in log:
        topic = record.topic
        state, emitted = groups.apply(state, record, topic)
        for emit in emitted:
            emit.value_bytes()
        outputs += len(emitted)
    return time.perf_counter() - started, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(describe())
    print(f"{args.jobs:,} jobs; {args.records:,} records per run; median of {args.repeat}")
    print(f"{'schedulers':>10} {'us/record':>10} {'records/s':>10} {'gc 700 us':>10} {'outputs/rec':>11} "
          f"{'snapshot s':>10}")
    for schedulers in (10, 100, 1000):
        state, ids = setup(schedulers, args.jobs)
        base = 10 * args.jobs
        log = [event_record(base + i, event, topic) for i, (topic, event) in enumerate(
            workload(ids, args.jobs, args.records))]
        gc.set_threshold(700, 10, 10)
        default_gc = run(state, log)[0]
        fewer_collections()
        timings = [run(state, log) for _ in range(args.repeat)]
        seconds = statistics.median(t for t, _ in timings)
        outputs = timings[0][1]
        truth = {"type": "MembershipSnapshot", "schedulers": [
            {"type": "SchedulerRegistered", "group": "g", "scheduler": m.scheduler, "address": m.address,
             "fault_tolerance": m.n, "alarm_threshold": m.M} for m in state.members.values()],
            "jobs": dict(state.owners), "offline": []}
        snap = event_record(base + args.records + 1, truth, groups.SCHEDULER_EVENTS)
        started = time.perf_counter()
        groups.apply(state, snap, groups.SCHEDULER_EVENTS)
        snapshot_s = time.perf_counter() - started
        print(f"{schedulers:>10} {seconds / args.records * 1e6:>10.1f} {args.records / seconds:>10,.0f} "
              f"{default_gc / args.records * 1e6:>10.1f} {outputs / args.records:>11.2f} {snapshot_s:>10.2f}")


if __name__ == "__main__":
    main()
