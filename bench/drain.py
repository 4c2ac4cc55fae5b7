"""The worker draining a backlog produced before it started: no producer competing for the cores.

bench/e2e.py times a backlog from its first record produced, with the bench's producer running
beside the worker; this one produces --records metric envelopes (20 pools) first, then starts
`tribunal worker` and times the decisions from the 100th to the last (start-up left out). Every
half second it prints the worker's and the broker's share of a core and the machine's idle share,
which is how stalls show (the worker idle with records waiting).
Run: `.venv/bin/python bench/drain.py [--records 60000]` (starts its own local stack).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import time
from pathlib import Path

import e2e  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

SKIP = 100  # decisions left out of the rate: the worker's first fetches


def idle_seconds() -> float:
    with open("/proc/stat") as stat:
        return int(stat.readline().split()[4]) / os.sysconf("SC_CLK_TCK")


async def drain(bootstrap: str, records: int, home: Path, broker: int) -> None:
    env, port = e2e.worker_env(bootstrap, "drain", home)
    await e2e.produce(bootstrap, "drain.policies", [(f"pool-{i:02d}".encode(), json.dumps(e2e.POLICY).encode())
                                                    for i in range(e2e.POOLS)])
    await e2e.produce(bootstrap, "drain.plugin_decider", e2e.metrics(records, 5))
    seen: list[tuple[float, bytes]] = []
    # A metric folded before its pool's policy (another topic) decides nothing: wait for most.
    task = await e2e.collecting(bootstrap, "drain.scaling-decisions", records, 600, seen)
    worker = e2e.start_worker(env)
    samples = []
    try:
        while not task.done():
            samples.append((time.time(), e2e.worker_cpu(worker.pid), e2e.worker_cpu(broker), idle_seconds(), len(seen)))
            await asyncio.wait([task], timeout=0.5)
        await task
        stats = e2e.worker_stats(port)
    finally:
        worker.terminate()
        worker.wait(60)
    for before, after in itertools.pairwise(samples):
        if after[4] > before[4]:
            dt = after[0] - before[0]
            print(f"  {after[4] - before[4]:6d} decisions  worker {(after[1] - before[1]) / dt:4.0%}  "
                  f"broker {(after[2] - before[2]) / dt:4.0%}  idle {(after[3] - before[3]) / dt:4.0%} of a core")
    times = sorted(at for at, _ in seen)
    rate = (len(times) - SKIP) / (times[-1] - times[SKIP])
    n = max(1, stats["records"])
    print(describe())
    print(f"tribunal worker, exactly-once, draining {records:,} records produced before it started: {rate:,.0f}/s "
          f"({stats['batches']:.0f} batches, largest {stats['largest']:.0f}; us/record: waiting for Faust "
          f"{stats['waiting'] / n * 1e6:.0f}, fold {stats['fold'] / n * 1e6:.0f}, "
          f"commit {stats['commit'] / n * 1e6:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=60_000)
    args = parser.parse_args()
    with local_stack("drain") as cluster:
        [broker] = [status.pid for status in cluster.status() if status.name == "kafka-1"]
        assert broker is not None
        asyncio.run(drain(cluster.topology.bootstrap, args.records, cluster.topology.home, broker))


if __name__ == "__main__":
    main()
