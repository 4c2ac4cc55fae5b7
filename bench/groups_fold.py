"""Per-record cost of the rejection-limits fold and its table writes: 1,000 and 100,000 jobs, 10 / 100 /
1,000 schedulers.

The group starts with every job owned (spread over the schedulers), loaded as the worker loads it
from its tables. Then a seeded mix that a busy group sees: a job moving (released, then acquired by
another scheduler), a job created and later deleted (K moves, so N may move for every scheduler
sharing an n), a scheduler put offline and back. Each record goes through `groups.apply` from raw
bytes (validation, fold, every output record) and its outputs are encoded to bytes, as the worker
would send them. `write` is what the worker's tables then take if every record were its own batch
(the worst case: the worker writes a key once per batch): the `group-state` entry and the job and
scheduler buckets the record touched, encoded as the tables encode them; `inline write` is the same
for the layout before jobs and schedulers had tables of their own (every owner, registration and
figures in the one entry). A snapshot of the whole group (every job compared) is timed apart.
Medians of --repeat runs, with the garbage collector's young-generation threshold the worker sets
(10,000) and, for comparison, CPython's default (700) for the fold.
Run: `.venv/bin/python bench/groups_fold.py [--jobs 1000 100000] [--records 20000]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time

from faust.serializers import codecs
from machine import describe  # type: ignore[import-not-found]

from streams.core import groups
from streams.core.groups.codec import dump_bucket, stored, touched
from streams.core.groups.state import NO_FIGURES, NO_MEMBERS, NO_OWNERS
from streams.core.source import SourceRecord
from streams.gc_settings import fewer_collections


def event_record(offset: int, event: dict[str, object], topic: str) -> SourceRecord:
    return SourceRecord(topic, 0, offset, offset, b"g", json.dumps({"group": "g", **event}).encode())


def setup(schedulers: int, jobs: int) -> tuple[groups.GroupState, list[str]]:
    """A group with every job owned, built as a worker would load it from its table."""
    ids = [f"s{i:04d}" for i in range(schedulers)]
    built = groups.GroupState()._replace(
        members=NO_MEMBERS.added((sid, groups.Member(sid, f"{sid}:7000", 1 + i % 3, jobs))
                                 for i, sid in enumerate(ids)),
        owners=NO_OWNERS.added((f"j{j:06d}", ids[j % len(ids)]) for j in range(jobs)))
    built = built._replace(figures=NO_FIGURES.added((sid, built.figures_of(sid)) for sid in ids)).fitted()
    return groups.load(groups.dump(built), stored(built)), ids


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


def run(state: groups.GroupState, log: list[SourceRecord], writes: bool = False) -> tuple[float, float, int, int]:
    """Seconds folding, seconds writing (`writes`: each record's table entries encoded, the group's entry and
    the buckets it touched), outputs, bytes written."""
    fold_s = write_s = 0.0
    outputs = written = 0
    clock = time.perf_counter
    for record in log:
        started = clock()
        after, emitted = groups.apply(state, record, record.topic)
        for emit in emitted:
            emit.value_bytes()
        folded = clock()
        if writes:
            written += len(codecs.dumps("json", groups.dump(after)))
            for name in sorted(touched(state, after)):
                written += len(codecs.dumps("json", dump_bucket(after, name)))
            write_s += clock() - folded
        fold_s += folded - started
        outputs += len(emitted)
        state = after
    return fold_s, write_s, outputs, written


def write_inline(state: groups.GroupState, log: list[SourceRecord], limit: int) -> float:
    """Seconds a record to encode the group's one entry with every job and scheduler inline (the layout before
    `group-buckets`)."""
    spent = 0.0
    for record in log[:limit]:
        state = groups.apply(state, record, record.topic)[0]
        started = time.perf_counter()
        codecs.dumps("json", {**groups.dump(state), "owners": dict(sorted(state.owners.items())),
                              "members": {sid: [m.address, m.n, m.M] for sid, m in sorted(state.members.items())},
                              "figures": {sid: list(f) for sid, f in sorted(state.figures.items())}})
        spent += time.perf_counter() - started
    return spent / limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--schedulers", type=int, nargs="+", default=[10, 100, 1_000])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(describe())
    print(f"{args.records:,} records per run; median of {args.repeat}; us per record")
    print(f"{'jobs':>7} {'schedulers':>10} {'fold':>7} {'write':>7} {'total':>7} {'records/s':>10} "
          f"{'bytes/rec':>9} {'fold gc700':>10} {'outputs/rec':>11} {'inline write':>12} {'snapshot s':>10}")
    for jobs in args.jobs:
        for schedulers in args.schedulers:
            measure(jobs, schedulers, args.records, args.repeat)


def measure(jobs: int, schedulers: int, records: int, repeat: int) -> None:
    state, ids = setup(schedulers, jobs)
    base = 10 * jobs
    log = [event_record(base + i, event, topic) for i, (topic, event) in enumerate(workload(ids, jobs, records))]
    gc.set_threshold(700, 10, 10)
    default_gc = run(state, log)[0]
    fewer_collections()
    runs = [run(state, log, writes=True) for _ in range(repeat)]
    fold_s, write_s = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    outputs, written = runs[0][2], runs[0][3]
    inline_s = write_inline(state, log, min(records, max(20, 2_000_000 // jobs)))
    truth = {"type": "MembershipSnapshot", "schedulers": [
        {"type": "SchedulerRegistered", "group": "g", "scheduler": m.scheduler, "address": m.address,
         "fault_tolerance": m.n, "alarm_threshold": m.M} for m in state.members.values()],
        "jobs": dict(state.owners), "offline": []}
    snap = event_record(base + records + 1, truth, groups.SCHEDULER_EVENTS)
    started = time.perf_counter()
    groups.apply(state, snap, groups.SCHEDULER_EVENTS)
    snapshot_s = time.perf_counter() - started
    us = 1e6 / records
    print(f"{jobs:>7,} {schedulers:>10,} {fold_s * us:>7.1f} {write_s * us:>7.1f} {(fold_s + write_s) * us:>7.1f} "
          f"{records / (fold_s + write_s):>10,.0f} {written / records:>9,.0f} {default_gc * us:>10.1f} "
          f"{outputs / records:>11.2f} {inline_s * 1e6:>12,.1f} {snapshot_s:>10.2f}")


if __name__ == "__main__":
    main()
