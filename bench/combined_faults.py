"""An operator's bad day at full scale (`tests.faults`): all four folds on three brokers, two workers, the ticker,
the bridge, two schedulers, three shard nodes and an executor, under load for four minutes while a worker is
SIGKILLed twice, a broker is lost for 15 s (the other worker and the ticker are SIGKILLed and started again
while it is down), a shard node is frozen past its session and the shard leader and a scheduler are SIGKILLed;
and, where network namespaces can be made (root, iproute2), a worker, a scheduler, a shard node and the executor
are each cut off from the network, and the elected bridge from ZooKeeper alone (issue 48).

It prints the faults, the figures (records, decisions, job starts, late reports refused, shard runs, the
longest time without a decision and the longest a shard task went unrun) and each check's violations; it exits
1 if any check found one. The test (`tests/test_combined_faults.py`) runs a one-minute day in the suite.
Run: `.venv/bin/python bench/combined_faults.py [--seconds 240 --metrics 100 --assigns 4 --seed N]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.faults, the harness the test runs too

from machine import describe  # type: ignore[import-not-found]

from tests import netns
from tests.faults import Day, Scale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240.0, help="how long the load runs")
    parser.add_argument("--metrics", type=float, default=100.0, help="metric reports a second, over the pools")
    parser.add_argument("--assigns", type=float, default=4.0, help="dispatcher assigns (1-2 jobs each) a second")
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=600, help="the shard job set's tasks")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    print(describe())
    scale = Scale(seconds=args.seconds, pools=args.pools, metrics_per_s=args.metrics, assigns_per_s=args.assigns,
                  tasks=args.tasks)
    reason = netns.unavailable()
    network = netns.Network() if reason is None else None
    try:
        with tempfile.TemporaryDirectory(prefix="tribunal-day-") as tmp:
            began = time.monotonic()
            report = Day(Path(tmp), scale, args.seed, network).live()
    finally:
        if network is not None:
            network.close()
    print(report.summary())
    if network is None:
        print(f"no partitions: network namespaces cannot be made here ({reason})")
    print(f"whole run {time.monotonic() - began:.0f} s")
    sys.exit(1 if any(report.violations.values()) else 0)


if __name__ == "__main__":
    main()
