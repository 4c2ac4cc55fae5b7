"""The worker's memory over a long run: RSS at start and after every 100,000 records, to --records.

A fresh local stack and `tribunal worker` (exactly-once); metric envelopes over 200 pools are
produced in steps of 100,000; after each step, once the worker has folded all of it (its
`/checkpoint/` page counts records), the worker's resident set size and the step's rate are printed.
Flat RSS means nothing grows per record: states are per pool, batches are dropped once written.
Run: `.venv/bin/python bench/worker_rss.py [--records 1000000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from e2e import POLICY, TRIBUNAL, produce, worker_stats  # type: ignore[import-not-found]
from machine import describe  # type: ignore[import-not-found]

from streams.infra import Cluster, Topology
from streams.infra.cluster import free_ports
from streams.io import envelope

POOLS, STEP = 200, 100_000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def step(i: int) -> list[tuple[bytes, bytes]]:
    return [(f"pool-{(i * 7919 + n) % POOLS:03d}".encode(),
             envelope(("ats", "hadoop", "redis")[n % 3], (n * 37 + i) % 101, "plugin_decider")) for n in range(STEP)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    print(describe())
    with tempfile.TemporaryDirectory(prefix="tribunal-rss-") as tmp:
        zk, kafka, controller, port = free_ports(4)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=kafka, controller_port=controller, zk_port=zk))
        cluster.up()
        bootstrap = cluster.topology.bootstrap
        env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": "rss.", "TRIBUNAL_APP_ID": "rss",
               "TRIBUNAL_DATA_DIR": str(Path(tmp) / "w"), "TRIBUNAL_WEB_PORT": str(port),
               "TRIBUNAL_LOG_LEVEL": "warning"}
        subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)
        worker = subprocess.Popen([TRIBUNAL, "worker"], env=env, stdout=(Path(tmp) / "w.log").open("wb"),
                                  stderr=subprocess.STDOUT)
        try:
            asyncio.run(produce(bootstrap, "rss.policies",
                                [(f"pool-{i:03d}".encode(), json.dumps(POLICY).encode()) for i in range(POOLS)]))
            while worker_stats_or_none(port, POOLS) is None:
                time.sleep(0.5)
            print(f"{'records':>10} {'RSS MB':>8} {'records/s':>10}")
            print(f"{0:>10,} {rss_mb(worker.pid):>8.1f}")
            for i in range(args.records // STEP):
                started = time.monotonic()
                asyncio.run(produce(bootstrap, "rss.plugin_decider", step(i)))
                target = POOLS + (i + 1) * STEP
                while worker_stats_or_none(port, target) is None:
                    time.sleep(0.5)
                rate = STEP / (time.monotonic() - started)
                print(f"{(i + 1) * STEP:>10,} {rss_mb(worker.pid):>8.1f} {rate:>10,.0f}", flush=True)
        finally:
            worker.terminate()
            worker.wait(60)
            cluster.down()


def worker_stats_or_none(port: int, records: int) -> dict[str, float] | None:
    """The worker's stats once it has folded `records` (None before, or while its page is not up)."""
    try:
        stats = worker_stats(port)
    except OSError:
        return None
    return stats if stats["records"] >= records else None


if __name__ == "__main__":
    main()
