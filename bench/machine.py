"""What the benchmarks share: the line each prints first (which machine its figures come from), and
a fresh local stack on free ports."""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams.infra import Cluster, Topology
from streams.infra.topology import free_ports


def ratio(name: str, values: list[float]) -> None:
    """One line a reader or a script finds a goal's figure by: `ratio: NAME = MEDIAN (LOW-HIGH, n=N)`, NAME as in
    the performance table and issue 59's goals."""
    import statistics

    print(f"ratio: {name} = {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}, n={len(values)})")


def describe() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return f"machine: {platform.machine()} {cpu}, {os.cpu_count()} cores; python {platform.python_version()}"


@contextmanager
def local_stack(name: str) -> Iterator[Cluster]:
    """ZooKeeper and one broker on free ports in a temporary home (`cluster.topology.home`), stopped after."""
    with tempfile.TemporaryDirectory(prefix=f"tribunal-{name}-") as tmp:
        zk, kafka, controller = free_ports(3)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=kafka, controller_port=controller, zk_port=zk))
        cluster.up()
        try:
            yield cluster
        finally:
            cluster.down()
