"""Per-command cost of the dispatcher fold with 1,000 and 100,000 jobs pending in one namespace.

The namespace holds `--pending` startable jobs (spread over ten workers at every size, in assigns of
at most 10,000, so that only the jobs pending differ; acceptable starts spread) under a cap of 100
running, loaded as the worker loads it. Then each timed record is a `JobFinished` of a running job,
which frees a slot, so the fold starts the next job in order: the dispatcher's steady state (two
outputs a command: the outcome and the start). Each goes through `dispatch.apply` from raw bytes
(validation, fold, every output) and its outputs are encoded to bytes, as the worker would send them,
under the worker's garbage-collector settings. The sizes alternate --repeat times; medians, and the median
of the pairs' ratios.
Run: `.venv/bin/python bench/dispatch_fold.py [--records 20000]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from machine import describe, ratio  # type: ignore[import-not-found]

from streams.core import dispatch
from streams.core.source import SourceRecord
from streams.gc_settings import fewer_collections

NS = "bench"
CAP = 100  # jobs running at once
WORKERS = 10  # the namespace's workers: the same at every size, so that only the jobs pending grow


def record(offset: int, value: dict[str, object]) -> SourceRecord:
    """Every record dated 0: a command moves the namespace's clock, and the bench measures starts, not timeouts."""
    return SourceRecord(dispatch.DISPATCH_COMMANDS, 0, offset, 0, NS.encode(), json.dumps(value).encode())


def setup(pending: int) -> tuple[dispatch.DispatchState, int]:
    """A namespace with CAP jobs running and `pending` startable ones waiting for a slot."""
    state, offset, total = dispatch.DispatchState(), 0, pending + CAP
    values: list[dict[str, object]] = [{"type": "MaxThreadsSet", "namespace": NS, "max": CAP}]
    batch = min(10_000, -(-total // WORKERS))  # as many workers at every size (an assign holds 10,000 at most)
    for b, first in enumerate(range(0, total, batch)):
        values.append({"type": "JobsAssigned", "namespace": NS, "worker": f"w{b % WORKERS}", "start": 0,
                       "end": 1_000_000,
                       "jobs": [{"external_id": f"{b}-{i}", "timeout_ms": 10**9}
                                for i in range(min(batch, total - first))]})
    for value in values:
        offset += 1
        state, _ = dispatch.apply(state, record(offset, value), dispatch.DISPATCH_COMMANDS)
    return dispatch.load(dispatch.dump(state), dispatch.buckets(state)), offset


def run(pending: int, records: int) -> float:
    """Commands/s over `records` finishes; a namespace with fewer jobs pending than that is set up again as
    often as needed (untimed), so that every size is timed over as many commands."""
    done, elapsed = 0, 0.0
    while done < records:
        count, seconds = _finishes(pending, min(records - done, pending))
        done, elapsed = done + count, elapsed + seconds
    return done / elapsed


def _finishes(pending: int, count: int) -> tuple[int, float]:
    """`count` finishes on a namespace of `pending` jobs: how many, and the seconds they took."""
    state, offset = setup(pending)
    # Each finish starts the next job in the dispatcher's order, so the jobs are finished in that order.
    order = sorted(state.jobs.values(), key=lambda j: (not j.running, j.acceptable_start, j.order))
    inputs = []
    for i in range(count):
        offset += 1
        inputs.append(record(offset, {"type": "JobFinished", "namespace": NS, "uuid": order[i].uuid}))
    gc.collect()
    started, outputs_seen = time.perf_counter(), 0
    for rec in inputs:
        state, outputs = dispatch.apply(state, rec, dispatch.DISPATCH_COMMANDS)
        for o in outputs:
            o.value_bytes()
        outputs_seen += len(outputs)
    elapsed = time.perf_counter() - started
    assert outputs_seen == 2 * len(inputs), "every finish should end one job and start the next"
    return len(inputs), elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(describe())
    fewer_collections()  # as the worker runs
    sizes = (1_000, 100_000)
    rates: dict[int, list[float]] = {size: [] for size in sizes}
    ratios = []
    for _ in range(args.repeat):  # the sizes alternated, so that a drift of the shared machine falls on both
        for size in sizes:
            rates[size].append(run(size, args.records))
        ratios.append(rates[sizes[1]][-1] / rates[sizes[0]][-1])
    for size in sizes:
        print(f"{size:>7,} jobs pending: {statistics.median(rates[size]):>9,.0f} commands/s (JobFinished, each "
              f"starting the next job; median of {args.repeat})")
    print(f"{sizes[1]:,} / {sizes[0]:,} pending: {statistics.median(ratios):.2f} (median of the {args.repeat} "
          f"alternated pairs' ratios; {min(ratios):.2f}-{max(ratios):.2f})")
    ratio(f"dispatcher commands/s at {sizes[1]:,} pending / at {sizes[0]:,}", ratios)


if __name__ == "__main__":
    main()
