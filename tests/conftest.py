"""Session fixtures: a real Kafka broker and a real ZooKeeper server for the integration tests.

Where they come from, in order:
* `KAFKA_BOOTSTRAP` / `ZOOKEEPER_HOSTS` set: the existing servers they name;
* `TRIBUNAL_TEST_BACKEND=testcontainers`: containers from official images, through
  testcontainers (needs a Docker engine that answers; without one the session fails, loudly);
* otherwise: the jars infra/ installs, started with `java` on free loopback ports in a temporary
  directory, so a test run never collides with `make run` or with another test run.

Each test uses its own topic prefix and app id (see `unique`), so tests never share state.

A test that takes one of these fixtures is marked `integration` here, whether or not its module says so
(`make test-fast` runs the others); the kill, broker-loss, scale-out, fuzz and secured-stack tests are also
`chaos`. Hypothesis runs the `dev` profile (few examples: the inner loop) unless `HYPOTHESIS_PROFILE` names
another; `make test`, what CI runs, names `ci`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from streams.infra.topology import free_ports
from tests import netns
from tests.helpers import Worker, tribunal
from tests.netns import Network

os.environ["TRIBUNAL_OLD_NAMES"] = "error"  # every command a test runs is spelt as today (streams/cli/renamed.py)
settings.register_profile("ci", max_examples=150, deadline=None)
settings.register_profile("dev", max_examples=10, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
BROKER_FIXTURES = frozenset({"stack", "kafka", "zookeeper", "worker_env", "worker", "net_stack"})
PARTITION_FIXTURES = frozenset({"network", "net_stack"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        if PARTITION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.chaos)


@dataclass(frozen=True)
class Stack:
    bootstrap: str
    zookeeper: str


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means no usable engine
        return False


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env_kafka, env_zk = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("ZOOKEEPER_HOSTS")
    if env_kafka and env_zk:
        yield Stack(env_kafka, env_zk)
        return
    if os.environ.get("TRIBUNAL_TEST_BACKEND") == "testcontainers":
        yield from _containers()
        return
    yield from local_stack(tmp_path_factory.mktemp("stack"))


def local_stack(home: Path, host: str = "127.0.0.1") -> Iterator[Stack]:
    """A stack of the installed jars on free ports, listening on `host`, down at the end."""
    from streams.infra import Cluster, Topology

    zk_port, kafka_port, controller_port = free_ports(3)
    cluster = Cluster(Topology(home=home, kafka_port=kafka_port, controller_port=controller_port, zk_port=zk_port,
                               host=host))
    try:
        cluster.up()
        yield Stack(cluster.topology.bootstrap, cluster.topology.zookeeper_hosts)
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def network() -> Iterator[Network]:
    """A bridge of the session's own, for processes in network namespaces (`tests.netns`); the partition tests
    skip, saying why, where namespaces cannot be made."""
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    net = netns.Network()
    try:
        yield net
    finally:
        net.close()


@pytest.fixture(scope="session")
def net_stack(network: Network, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second stack, on the bridge's address: what processes in the network's namespaces reach, and lose when
    their link is cut (always the installed jars: the servers must listen where the namespaces are)."""
    yield from local_stack(tmp_path_factory.mktemp("net-stack"), network.host)


def _containers() -> Iterator[Stack]:
    if not _docker_answers():
        pytest.exit("TRIBUNAL_TEST_BACKEND=testcontainers, but no Docker engine answers", returncode=3)
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.kafka import KafkaContainer

    kafka = KafkaContainer("apache/kafka:3.9.1").with_kraft()
    zk = DockerContainer("zookeeper:3.8.4").with_exposed_ports(2181)
    with kafka, zk:
        wait_for_logs(zk, "binding to port", timeout=60)
        yield Stack(kafka.get_bootstrap_server(),
                    f"{zk.get_container_host_ip()}:{zk.get_exposed_port(2181)}")


@pytest.fixture(scope="session")
def kafka(stack: Stack) -> str:
    """Bootstrap servers of a real Kafka broker."""
    return stack.bootstrap


@pytest.fixture(scope="session")
def zookeeper(stack: Stack) -> str:
    """host:port of a real ZooKeeper server."""
    return stack.zookeeper


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Iterator[str]:
    """A name no other test uses: for topic prefixes, app ids and ZooKeeper paths.

    A test on the broker has its topics (inputs, outputs, changelogs: all named from this) deleted
    afterwards: a session's tests make thousands of partitions, more than a broker's small heap holds.
    """
    name = f"t{uuid.uuid4().hex[:10]}"
    yield name
    if "kafka" in request.fixturenames:
        asyncio.run(_delete_topics(request.getfixturevalue("kafka"), name))


async def _delete_topics(bootstrap: str, prefix: str, until_gone: bool = False) -> None:
    """Delete every topic named with `prefix`; `until_gone`: and wait until the broker lists none of them."""
    from streams import kafka

    admin = kafka.admin(bootstrap, request_timeout_ms=15000)
    try:
        await admin.start()
        mine = [t for t in await admin.list_topics() if t.startswith(prefix)]
        if mine:
            await admin.delete_topics(mine)
        for _ in range(100 if until_gone else 0):
            if not set(mine) & set(await admin.list_topics()):
                break
            await asyncio.sleep(0.2)
        await admin.close()
    except Exception as e:  # noqa: BLE001 - cleanup must not fail the test it follows
        print(f"could not delete the topics of {prefix}: {e!r}")


@pytest.fixture
def worker_env(kafka: str, unique: str, tmp_path: Path) -> dict[str, str]:
    return env_of(kafka, unique, tmp_path)


def env_of(bootstrap: str, unique: str, tmp_path: Path) -> dict[str, str]:
    """A worker's (and its clients') environment on the broker at `bootstrap`, named after the test; its data
    directory's parent does not exist yet, as on a fresh checkout."""
    [web_port] = free_ports(1)
    return {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": f"{unique}.",
            "TRIBUNAL_APP_ID": unique, "TRIBUNAL_DATA_DIR": str(tmp_path / "home" / "worker"),
            "TRIBUNAL_WEB_PORT": str(web_port), "TRIBUNAL_PARTITIONS": "4"}


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Worker]:
    tribunal("topics", "create", env=worker_env)
    w = Worker(worker_env, tmp_path / "worker.log")
    w.start()
    try:
        yield w
    finally:
        w.stop()
