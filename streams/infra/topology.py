"""The local stack as configuration: its ports and sizes (`Topology`), each server's configuration file, and
free ports to put a stack on. `streams.infra.cluster` runs what this describes."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from streams.errors import InfraError
from streams.infra.paths import default_home
from streams.infra.secure import Credentials, write_private

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Topology:
    """Ports, sizes and the data directory of one local stack (ZooKeeper + N brokers).

    Broker i (0-based) listens on `kafka_port + i` and runs its KRaft controller on
    `controller_port + i`; every broker is also a controller, so 3 brokers form a real quorum.
    """

    home: Path
    brokers: int = 1
    kafka_port: int = 9092
    controller_port: int = 19093
    zk_port: int = 2181
    broker_heap_mb: int = 384
    zk_heap_mb: int = 128
    secure: bool = False  # SASL_SSL with SCRAM users and ACLs (streams.infra.secure)
    host: str = LOOPBACK  # where clients reach ZooKeeper and the brokers: loopback, or (the partition tests) the
    # address of a bridge of this machine that network namespaces reach; the controllers stay on loopback

    @classmethod
    def default(cls, brokers: int = 1, home: Path | None = None, secure: bool = False) -> Topology:
        """The single-broker stack on the well-known ports, or an N-broker cluster beside it; a secured
        stack in `secure/` of the default home, on ports of its own, so both can run at once."""
        base = home or default_home()
        if secure:
            return cls(home=base / ("secure" if brokers == 1 else f"secure-b{brokers}"), brokers=brokers,
                       kafka_port=9392, controller_port=19392, zk_port=2183, secure=True)
        if brokers == 1:
            return cls(home=base)
        return cls(home=base.parent / f"{base.name}-b{brokers}", brokers=brokers,
                   kafka_port=9192, controller_port=19192, zk_port=2182)

    @property
    def credentials(self) -> Credentials:
        """Where a secured stack keeps its CA, certificate and users (made by `Cluster.configure`)."""
        return Credentials(self.home / "credentials")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{self.kafka_port + i}" for i in range(self.brokers))

    @property
    def zookeeper_hosts(self) -> str:
        return f"{self.host}:{self.zk_port}"

    def endpoints(self) -> list[tuple[str, int]]:
        """Every address a server of the stack listens on: ZooKeeper's and the brokers' on `host`, the
        controllers' on loopback."""
        kafka = [(self.host, self.kafka_port + i) for i in range(self.brokers)]
        controllers = [(LOOPBACK, self.controller_port + i) for i in range(self.brokers)]
        return [(self.host, self.zk_port), *kafka, *controllers]


def broker_properties(topology: Topology, index: int) -> dict[str, str]:
    """server.properties of broker `index`: combined broker+controller in KRaft mode.

    Internal topics get a replication factor no larger than the cluster, so transactions (and
    therefore exactly-once) work on a single broker; with 3 brokers they get 3 replicas and
    min.insync.replicas 2, as a production cluster would.
    """
    n = topology.brokers
    voters = ",".join(f"{i + 1}@{LOOPBACK}:{topology.controller_port + i}" for i in range(n))
    rf = min(3, n)
    isr = min(2, n)
    port = topology.kafka_port + index
    cport = topology.controller_port + index
    listener = "SASL_SSL" if topology.secure else "PLAINTEXT"
    return {
        "process.roles": "broker,controller",
        "node.id": str(index + 1),
        "controller.quorum.voters": voters,
        "listeners": f"{listener}://{topology.host}:{port},CONTROLLER://{LOOPBACK}:{cport}",
        "advertised.listeners": f"{listener}://{topology.host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        **(topology.credentials.broker_properties() if topology.secure else {}),
        "log.dirs": str(topology.home / f"kafka-{index + 1}" / "data"),
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.partitions": "1",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
    }


def zookeeper_config(topology: Topology) -> dict[str, str]:
    """zoo.cfg of the standalone ZooKeeper server (no admin server: it would take port 8080)."""
    return {
        "tickTime": "2000",
        "initLimit": "10",
        "syncLimit": "5",
        "dataDir": str(topology.home / "zookeeper" / "data"),
        "clientPort": str(topology.zk_port),
        "clientPortAddress": topology.host,
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "ruok,srvr,stat",
    }


def write_properties(path: Path, props: dict[str, str]) -> None:
    """Readable by its owner only: a secured broker's holds its own passwords."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, "".join(f"{k}={v}\n" for k, v in props.items()))


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports nobody listens on right now (for tests and benchmarks)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port_block(count: int, low: int = 20000, high: int = 32000) -> int:
    """The first of `count` consecutive free ports, below Linux's ephemeral range (32768+).

    Brokers of one cluster take consecutive ports; picking them outside the range the kernel
    hands out to client sockets keeps a test's cluster from colliding with live connections.
    """
    for base in range(low + (os.getpid() * 37) % (high - low - count), high - count, count + 1):
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind((LOOPBACK, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise InfraError(f"no {count} consecutive free ports between {low} and {high}")
