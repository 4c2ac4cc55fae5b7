"""Start-up time and resident memory of the local ZooKeeper and Kafka servers.

Starts a fresh stack (new data directory, free ports) `--runs` times, and reports for each server
the seconds from `java` launch to answering (ZooKeeper: `ruok` -> `imok`; Kafka: metadata lists
the broker) and its resident set size once up. Run: `.venv/bin/python bench/infra_startup.py`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from machine import describe  # type: ignore[import-not-found]

from streams.infra import Cluster, Topology
from streams.infra.cluster import rss_kb
from streams.infra.install import resolved_versions
from streams.infra.topology import free_ports


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tribunal-bench-") as home:
        zk, kafka, controller = free_ports(3)
        cluster = Cluster(Topology(home=Path(home), kafka_port=kafka, controller_port=controller, zk_port=zk))
        try:
            timings = cluster.up()
            time.sleep(5)  # let the JVMs settle before reading RSS
            result = {f"{k} start s": v for k, v in timings.items()}
            for status in cluster.status():
                result[f"{status.name} RSS MiB"] = (rss_kb(status.pid) or 0) / 1024 if status.pid else 0
            return result
        finally:
            cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    print(f"{describe()}; "
          f"versions: {resolved_versions()}")
    print(f"{'measure':<24} {'median':>8} {'min':>8} {'max':>8}   ({args.runs} runs)")
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key:<24} {statistics.median(values):>8.2f} {min(values):>8.2f} {max(values):>8.2f}")


if __name__ == "__main__":
    main()
