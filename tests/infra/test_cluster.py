"""`tribunal infra up|down|status` against real JVMs: idempotent up, clean down, a 3-broker quorum."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from streams.infra.cluster import Cluster, kafka_broker_count
from streams.infra.topology import Topology, free_port_block, free_ports
from tests.helpers import tribunal, until

pytestmark = pytest.mark.integration


def _port_args(home: Path, zk: int, kafka: int, controller: int, brokers: int = 1) -> list[str]:
    return ["--home", str(home), "--zk-port", str(zk), "--kafka-port", str(kafka),
            "--controller-port", str(controller), "--brokers", str(brokers)]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pids(home: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in sorted((home / "run").glob("*.pid"))}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_up_twice_is_harmless_and_down_leaves_nothing_behind(tmp_path: Path) -> None:
    zk, kafka, controller = free_ports(3)
    args = _port_args(tmp_path, zk, kafka, controller)
    try:
        first = tribunal("infra", "up", *args)
        assert "started in" in first.stdout
        pids = _pids(tmp_path)
        assert set(pids) == {"zookeeper", "kafka-1"}
        assert tribunal("infra", "status", *args).returncode == 0

        second = tribunal("infra", "up", *args)
        assert second.stdout.count("already running") == 2
        assert _pids(tmp_path) == pids
        assert kafka_broker_count(f"127.0.0.1:{kafka}") == 1
        assert (tmp_path / "logs" / "kafka-1.log").stat().st_size > 0
    finally:
        down = tribunal("infra", "down", *args)
    assert "kafka-1" in down.stdout and "zookeeper" in down.stdout
    assert not any(_alive(pid) for pid in pids.values())
    assert not any(_listening(p) for p in (zk, kafka, controller))
    assert _pids(tmp_path) == {}
    assert tribunal("infra", "status", *args, check=False).returncode == 1


def test_three_broker_kraft_cluster_replicates(tmp_path: Path) -> None:
    zk, *_ = free_ports(1)
    base = free_port_block(6)
    kafka, controller = base, base + 3
    topology = Topology(home=tmp_path, brokers=3, zk_port=zk, kafka_port=kafka, controller_port=controller,
                        broker_heap_mb=256)
    cluster = Cluster(topology)
    try:
        cluster.up()
        until(lambda: kafka_broker_count(topology.bootstrap) == 3, "three brokers in the metadata", 30, every=0.5)
        assert kafka_broker_count(topology.bootstrap) == 3
        asyncio.run(_create_replicated_topic(topology.bootstrap))
    finally:
        cluster.down()
    assert not any(_listening(p) for _, p in topology.endpoints())


async def _create_replicated_topic(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic("replicated", 3, 3)])
        replicas: list[int] = []
        for _ in range(50):  # the new topic's metadata reaches every broker within moments
            [description] = await admin.describe_topics(["replicated"])
            replicas = [len(p["replicas"]) for p in description["partitions"]]
            if len(replicas) == 3:
                break
            await asyncio.sleep(0.2)
        assert replicas == [3, 3, 3]
    finally:
        await admin.close()
