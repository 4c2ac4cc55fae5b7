"""Supervising a local ZooKeeper server and a KRaft Kafka cluster as plain `java` processes.

Each server runs detached in its own session, with a pid file, a log file and a data directory
under the topology's `home`; `up` is idempotent (a live server is left alone, formatted storage is
kept) and `down` waits until every process has exited and every port is free, so a later `up` or
another test run never trips over a leftover.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.errors import InfraError
from streams.infra.install import install_jars
from streams.infra.paths import infra_dir, lib_dir
from streams.infra.topology import LOOPBACK, Topology, broker_properties, write_properties, zookeeper_config


@dataclass(frozen=True)
class Server:
    name: str
    main_class: str
    config: Path
    heap_mb: int
    port: int
    host: str = LOOPBACK  # where it answers clients


@dataclass
class ServerStatus:
    name: str
    pid: int | None
    port: int
    alive: bool
    listening: bool
    rss_kb: int | None = None


def _port_open(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _zk_ruok(port: int, host: str = LOOPBACK) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


async def _kafka_brokers(bootstrap: str, security: dict[str, Any]) -> int:
    from aiokafka.client import AIOKafkaClient  # the shell may use aiokafka; imported lazily

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=3000, **security)
    try:
        await client.bootstrap()
        return len(client.cluster.brokers())
    finally:
        await client.close()


def kafka_broker_count(bootstrap: str, security: dict[str, Any] | None = None) -> int:
    """How many brokers the cluster's metadata lists (0 when it does not answer); `security`: aiokafka's
    connection arguments (`streams.kafka.security`), plaintext if not given."""
    try:
        return asyncio.run(asyncio.wait_for(_kafka_brokers(bootstrap, security or {}), timeout=10))
    except Exception:  # noqa: BLE001 - any failure to answer means "not ready yet"
        return 0


def rss_kb(pid: int) -> int | None:
    """Resident set size of a process, from /proc (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Cluster:
    """One local stack: ZooKeeper plus `topology.brokers` KRaft brokers."""

    topology: Topology
    lib: Path = field(default_factory=lib_dir)
    log4j: Path = field(default_factory=lambda: infra_dir() / "log4j.properties")
    _answered_at: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    # -- layout ---------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        return self.topology.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.topology.home / "logs"

    def servers(self) -> list[Server]:
        t = self.topology
        zk = Server("zookeeper", "org.apache.zookeeper.server.ZooKeeperServerMain",
                    t.home / "zookeeper" / "zoo.cfg", t.zk_heap_mb, t.zk_port, t.host)
        brokers = [
            Server(f"kafka-{i + 1}", "kafka.Kafka", t.home / f"kafka-{i + 1}" / "server.properties",
                   t.broker_heap_mb, t.kafka_port + i, t.host)
            for i in range(t.brokers)
        ]
        return [zk, *brokers]

    def log_file(self, server: Server) -> Path:
        return self.log_dir / f"{server.name}.log"

    # -- processes ------------------------------------------------------------------------
    def _java(self) -> str:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if not java or not Path(java).exists():
            raise InfraError("java is not installed: run infra/bootstrap.sh, or install a JDK 17")
        return java

    def jvm(self, server: Server | None, heap_mb: int) -> list[str]:
        """The command line of a JVM on the installed jars, up to the main class (a server's, or a tool's)."""
        marker = [f"-Dtribunal.server={server.name}", f"-Dtribunal.home={self.topology.home}"] if server else []
        return [
            self._java(), f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{self.log4j}", *marker,
            "-cp", f"{self.lib}/*",
        ]

    def _pid_file(self, server: Server) -> Path:
        return self.run_dir / f"{server.name}.pid"

    def pid(self, server: Server) -> int | None:
        """The pid of a live process that is this server of this home, else None.

        The command line is checked, not just the pid, so a recycled pid is never mistaken for
        (or killed as) one of ours.
        """
        try:
            pid = int(self._pid_file(server).read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        want = [f"-Dtribunal.server={server.name}".encode(), f"-Dtribunal.home={self.topology.home}".encode()]
        if all(w in cmdline for w in want) and _alive(pid):
            return pid
        return None

    def _start(self, server: Server) -> int:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if _port_open(server.port, server.host):
            raise InfraError(f"port {server.port} for {server.name} is taken by another process")
        cmd = [*self.jvm(server, server.heap_mb), server.main_class, str(server.config)]
        with self.log_file(server).open("ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        self._pid_file(server).write_text(f"{proc.pid}\n")
        return proc.pid

    # -- configuration --------------------------------------------------------------------
    def _cluster_id(self) -> str:
        path = self.topology.home / "cluster.id"
        if path.is_file():
            return path.read_text().strip()
        while True:  # Kafka's Uuid.toString(): url-safe base64 of 16 random bytes, never "-..."
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            if not cid.startswith("-"):
                break
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(cid + "\n")
        return cid

    def configure(self) -> None:
        """Write zoo.cfg and each server.properties, and format KRaft storage once."""
        t = self.topology
        if t.secure and t.host != LOOPBACK:
            raise InfraError("a secured stack listens on 127.0.0.1 only: its certificate names that address")
        write_properties(t.home / "zookeeper" / "zoo.cfg", zookeeper_config(t))
        Path(zookeeper_config(t)["dataDir"]).mkdir(parents=True, exist_ok=True)
        cid = self._cluster_id()
        if t.secure:
            t.credentials.make()
        users = t.credentials.scram_arguments() if t.secure else []
        formats = []
        for i, server in enumerate(self.servers()[1:]):
            props = broker_properties(t, i)
            write_properties(server.config, props)
            if not (Path(props["log.dirs"]) / "meta.properties").exists():
                cmd = [*self.jvm(None, 128), "kafka.tools.StorageTool", "format", "-t", cid,
                       "-c", str(server.config), "--ignore-formatted", *users]
                formats.append((server, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                         stderr=subprocess.STDOUT)))
        for server, proc in formats:
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise InfraError(f"formatting storage of {server.name} failed: {out.decode()[-500:]}")

    # -- lifecycle ------------------------------------------------------------------------
    def up(self, timeout: float = 120.0) -> dict[str, float]:
        """Start whatever is not running and wait until every server answers.

        Returns the seconds each server took to answer (0.0 for one that was already up).
        """
        install_jars(self.lib)
        self.configure()
        servers = self.servers()
        zk, brokers = servers[0], servers[1:]
        began: dict[str, float] = {}
        pids: dict[str, int] = {}
        for server in servers:
            pid = self.pid(server)
            if pid is None:
                began[server.name] = time.monotonic()
                pid = self._start(server)
            pids[server.name] = pid
            if server is zk:
                self._wait(zk, pid, lambda: _zk_ruok(zk.port, zk.host), timeout)
        for server in brokers:
            self._wait(server, pids[server.name], functools.partial(_port_open, server.port, server.host), timeout)
        security = self.admin_security()
        self._wait(brokers[0], pids[brokers[0].name], lambda: self._brokers_settled(len(brokers), security), timeout)
        done = time.monotonic()
        timings = {s.name: 0.0 for s in servers}
        if zk.name in began:
            timings[zk.name] = self._answered_at[zk.name] - began[zk.name]
        for server in brokers:
            if server.name in began:
                timings[server.name] = done - began[server.name]
        return timings

    def _brokers_settled(self, expected: int, security: dict[str, Any]) -> bool:
        """Every broker is in the metadata, twice in a row: a freshly started KRaft broker can be
        fenced again for a moment while its peers on a busy 2-core machine catch up."""
        if kafka_broker_count(self.topology.bootstrap, security) < expected:
            return False
        time.sleep(0.5 if expected > 1 else 0)
        return expected == 1 or kafka_broker_count(self.topology.bootstrap, security) >= expected

    def admin_security(self) -> dict[str, Any]:
        """aiokafka's connection arguments for the stack's administrator (none on a plaintext stack)."""
        if not self.topology.secure:
            return {}
        from streams.kafka import security
        from streams.settings import Settings

        return security(Settings.model_validate(self.topology.credentials.settings("admin")))

    def _wait(self, server: Server, pid: int, ready: Callable[[], bool], timeout: float) -> None:
        # Checked by pid, not by self.pid(): between fork and exec the child's command line is
        # still Python's, so the command-line check would call a starting server dead.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                self._answered_at[server.name] = time.monotonic()
                return
            if not _alive(pid):
                raise InfraError(f"{server.name} exited during start-up; see {self.log_file(server)}:\n"
                                 + _tail(self.log_file(server)))
            time.sleep(0.2)
        raise InfraError(f"{server.name} did not answer within {timeout:.0f}s; see {self.log_file(server)}")

    def down(self, timeout: float = 60.0) -> list[str]:
        """Stop brokers, then ZooKeeper; SIGKILL what ignores SIGTERM. Returns the names stopped."""
        servers = self.servers()
        stopped = self._stop(servers[1:], timeout) + self._stop(servers[:1], timeout)
        deadline = time.monotonic() + timeout
        while any(_port_open(p, h) for h, p in self.topology.endpoints()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return stopped

    def _stop(self, servers: Iterable[Server], timeout: float) -> list[str]:
        pids = {s.name: (s, p) for s in servers if (p := self.pid(s)) is not None}
        for _, pid in pids.values():
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(pid) for _, pid in pids.values()):
            time.sleep(0.2)
        for _, pid in pids.values():
            if _alive(pid):
                _signal_group(pid, signal.SIGKILL)
        for server, pid in pids.values():
            while _alive(pid):
                time.sleep(0.05)
            self._pid_file(server).unlink(missing_ok=True)
        return sorted(pids)

    def kill(self, server: Server) -> None:
        """SIGKILL one server, as a machine failing would (the chaos tests); `start` brings it back."""
        pid = self.pid(server)
        if pid is None:
            return
        _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        # A JVM's main thread can show as a zombie while its other threads still hold the listening socket.
        while (_alive(pid) or _port_open(server.port, server.host)) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._pid_file(server).unlink(missing_ok=True)

    def start(self, server: Server, timeout: float = 120.0) -> None:
        """Start one server of a running stack again and wait until it answers (a broker: is in the cluster)."""
        pid = self._start(server)
        if server.main_class == "kafka.Kafka":
            self._wait(server, pid, functools.partial(_port_open, server.port, server.host), timeout)
            security = self.admin_security()
            self._wait(server, pid, lambda: self._brokers_settled(self.topology.brokers, security), timeout)
        else:
            self._wait(server, pid, lambda: _zk_ruok(server.port, server.host), timeout)

    def status(self) -> list[ServerStatus]:
        out = []
        for server in self.servers():
            pid = self.pid(server)
            out.append(ServerStatus(server.name, pid, server.port, pid is not None,
                                    _port_open(server.port, server.host), rss_kb(pid) if pid else None))
        return out

    def purge(self) -> None:
        """Delete the data, logs and pid files (the servers must be down)."""
        if any(s.alive for s in self.status()):
            raise InfraError("servers are still running: run `tribunal infra down` first")
        shutil.rmtree(self.topology.home, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone; reap it
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
