"""An operator's bad day (issue 39): all four folds at once on three brokers, under overlapping faults.

The stack: three brokers (each a KRaft controller) and ZooKeeper; two workers; the ticker; the ZooKeeper
bridge; two schedulers over a group's jobs; three shard nodes over a job set's tasks; an executor running the
dispatcher's jobs of one worker (those of another time out, are retried once and fail); metrics for the
decider's pools and assigns for the dispatcher produced at steady rates. While they run: a worker is
SIGKILLed (twice), a broker is SIGKILLed for 15 s and, while it is down, `topics create` is run three times and
the other worker and the ticker are SIGKILLed and started again, a shard node is SIGSTOPped past its session,
the shard leader and a scheduler are SIGKILLed. Given a network of its own (`tests.netns`, where namespaces can be
made), the stack listens on its bridge's address, and the second worker, scheduler B, shard node n3 and the executor
each run in a network namespace, and the day cuts each off in turn (issue 48): the worker past its group session (a
zombie the other fences), B and n3 past their ZooKeeper sessions, the executor for a few seconds; and the elected
ZooKeeper bridge (two stand) is cut off from ZooKeeper alone, through a proxy, past its session. Each fault is in
`Report.faults`, with when it began; a process found dead when a fault came for it had ended on its own, and counts
against the day.

`Day.check` then asks each question on its own (`tests.checks`): every input answered exactly once and
`replay --from-kafka --verify` agreeing; no task on two shard nodes at once; no cap exceeded and one final
outcome per job; no job on two schedulers at once; one bridge publishing at a time (terms never decrease on its
topics); every process running unless the day ended it. The test
(`tests/test_combined_faults.py`) runs a short day; `bench/combined_faults.py` a long one, and prints the
figures.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.clients import envelope, read_log
from streams.core import dispatch
from streams.infra import Cluster, Topology
from streams.infra.topology import free_port_block, free_ports
from streams.shards.check import check, read
from tests.checks import (
    decision_violations,
    dispatch_violations,
    publisher_violations,
    scheduler_runs,
    scheduler_violations,
)
from tests.helpers import Service, Worker, produce_all, read_committed, tribunal, until, wait_until_ready
from tests.netns import Namespace, Network
from tests.shards.proxy import Proxy
from tests.worker.test_crash import pool_policy

BROKERS, PARTITIONS = 3, 3
SESSION = 4.0  # the ZooKeeper session of the bridge, schedulers, shard nodes and ticker (seconds)
CAP, W1_CAP = 12, 6  # the namespace's cap and its worker w1's
GROUP_JOBS = 10
CUT_OFF = ("worker-2", "B", "n3", "executor")  # each in a network namespace of its own, when the day has a network
WORKER_SESSION = 10.0  # the workers' group session (the default)


@dataclass(frozen=True)
class Scale:
    seconds: float = 60.0  # how long the load runs; the faults are spread over it
    pools: int = 20
    metrics_per_s: float = 25.0
    assigns_per_s: float = 1.5
    tasks: int = 60
    broker_down: float = 15.0


@dataclass
class Report:
    """What a day did and what its checks found."""

    seed: int
    faults: list[tuple[float, str]] = field(default_factory=list)  # seconds into the load, what
    figures: dict[str, Any] = field(default_factory=dict)
    violations: dict[str, list[str]] = field(default_factory=dict)  # check -> what broke it (nothing: it held)

    def summary(self) -> str:
        lines = [f"seed {self.seed}; {len(self.faults)} faults: "
                 + ", ".join(f"{what} at {at:.0f} s" for at, what in sorted(self.faults))]
        lines += [f"  {name}: {value}" for name, value in self.figures.items()]
        lines += [f"  {name}: {len(found)} violations {found[:3]}" for name, found in self.violations.items()]
        return "\n".join(lines)


class Day:
    def __init__(self, home: Path, scale: Scale, seed: int | None = None, network: Network | None = None) -> None:
        self.home, self.scale = home, scale
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.report = Report(self.seed)
        self.unique = f"day{self.seed:x}"
        self.root = f"/{self.unique}"
        block = free_port_block(2 * BROKERS)
        self.network = network
        self.spaces: dict[str, Namespace] = {name: network.namespace() for name in CUT_OFF} if network else {}
        self.cluster = Cluster(Topology(home=home / "stack", brokers=BROKERS, kafka_port=block,
                                        controller_port=block + BROKERS, zk_port=free_ports(1)[0],
                                        broker_heap_mb=320, **({"host": network.host} if network else {})))
        self.proxy: Proxy | None = None  # the first bridge's way to ZooKeeper, which the day cuts
        self.services: dict[str, Service] = {}
        self.ended: set[str] = set()  # services the day stopped on purpose
        self.killed: dict[str, list[float]] = {}
        self.exited: list[str] = []  # processes that ended on their own, found by a later fault
        self.metrics: list[tuple[int, int]] = []  # (partition, offset) of each metric produced
        self.jobs = 0
        self.began = 0.0
        self.timers: list[threading.Timer] = []

    def live(self) -> Report:
        """The whole day: the stack up, the load and the faults, the checks; the stack down however it ends."""
        try:
            self.up()
            self.run()
            return self.check()
        finally:
            self.down()

    # -- the stack ------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return self.cluster.topology.bootstrap

    def env(self, data: str = "") -> dict[str, str]:
        return {**os.environ, "KAFKA_BOOTSTRAP": self.bootstrap,
                "ZOOKEEPER_HOSTS": self.cluster.topology.zookeeper_hosts,
                "TRIBUNAL_TOPIC_PREFIX": f"{self.unique}.", "TRIBUNAL_APP_ID": self.unique,
                "TRIBUNAL_PARTITIONS": str(PARTITIONS), "TRIBUNAL_REPLICATION_FACTOR": "3",
                "TRIBUNAL_DATA_DIR": str(self.home / (data or "data")), "TRIBUNAL_WEB_PORT": str(free_ports(1)[0])}

    def topic(self, name: str) -> str:
        return f"{self.unique}.{name}"

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> Service:
        wrap = self.spaces[name].wrap([]) if name in self.spaces else []
        service = (Worker(env or self.env(name), self.home / f"{name}.log", wrap=wrap) if not args
                   else Service(env or self.env(), self.home / f"{name}.log", *args, wrap=wrap))
        service.start()
        self.services[name] = service
        return service

    def up(self) -> None:
        self.cluster.up()
        env = self.env()
        tribunal("topics", "create", env=env)
        tribunal("shards", "tasks", "--job-set", "js", str(self.scale.tasks), env=env)
        asyncio.run(produce_all(self.bootstrap, [
            *((self.topic("policies"), f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode())
              for i in range(self.scale.pools)),
            *((self.topic(dispatch.DISPATCH_COMMANDS), b"ns", json.dumps(v).encode()) for v in (
                {"type": "MaxThreadsSet", "namespace": "ns", "max": CAP},
                {"type": "WorkerMaxSet", "namespace": "ns", "worker": "w1", "max": W1_CAP}))]))
        for name in ("worker-1", "worker-2"):
            self.start(name)
        self.start("ticker", "dispatch", "ticker", "--root", self.root, "--session-timeout", str(SESSION))
        self.proxy = Proxy(self.cluster.topology.zookeeper_hosts)
        bridge = ("groups", "bridge", "--root", self.root, "--snapshot-interval", "2", "--session-timeout",
                  str(SESSION))
        self.start("bridge", *bridge, env={**self.env(), "ZOOKEEPER_HOSTS": self.proxy.address})
        until(lambda: "elected: publishing" in self.services["bridge"].log(), "the first bridge to be elected",
              timeout=120)
        self.start("bridge-2", *bridge)
        for sid in "AB":
            self.scheduler(sid)
        for node in ("n1", "n2", "n3"):
            self.shard_node(node)
        self.start("executor", "dispatch", "executor", "--namespace", "ns", "--worker", "w1", "--seconds", "0.5",
                   "--run-log", str(self.home / "executor.jsonl"))
        for name in ("worker-1", "worker-2"):
            wait_until_ready(self.worker(name), 1, timeout=240)
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.cluster.topology.zookeeper_hosts)
        zk.start(timeout=30)
        try:
            for i in range(GROUP_JOBS):
                zk.ensure_path(f"{self.root}/g/jobs/job{i:02d}")
            until(lambda: len(zk.get_children(f"{self.root}/g/owners")) == GROUP_JOBS
                  if zk.exists(f"{self.root}/g/owners") else False, "every group job to be owned", timeout=180)
            until(lambda: _live_nodes(zk, self.root) == {"n1", "n2", "n3"}, "the shard plan to cover three nodes",
                  timeout=180)
        finally:
            zk.stop()
            zk.close()

    def worker(self, name: str) -> Worker:
        service = self.services[name]
        assert isinstance(service, Worker)
        return service

    def scheduler(self, sid: str) -> Service:
        return self.start(sid, "groups", "scheduler", "--group", "g", "--id", sid, "--root", self.root,
                          "--run-log", str(self.home / f"runs-{sid}.jsonl"), "--session-timeout", str(SESSION),
                          "--alarm-threshold", "8", "--drain-interval", "0.2")

    def shard_node(self, node: str) -> Service:
        return self.start(node, "shards", "node", "--job-set", "js", "--id", node, "--address",
                          f"10.0.0.{node[1:]}:9000",
                          "--run-log", str(self.home / f"shard-runs-{node}.jsonl"), "--period", "1",
                          "--duration", "0.3", "--grace", "1", "--snapshot-interval", "3",
                          "--session-timeout", str(SESSION), "--shard-root", self.root)

    def down(self) -> None:
        for space in self.spaces.values():
            space.heal()
        if self.proxy is not None:
            self.proxy.close()
        for name, service in self.services.items():
            if service.proc is not None and service.alive:
                os.kill(service.proc.pid, signal.SIGCONT)  # a frozen one must hear its SIGTERM
            service.stop(timeout=30)
            self.ended.add(name)
        self.cluster.down()

    # -- the faults -----------------------------------------------------------------------------------

    def kill(self, name: str) -> None:
        service = self.services[name]
        if not service.alive:  # it ended on its own: no fault of the day's
            self.exited.append(f"{name} had exited ({service.proc.returncode if service.proc else None}) when the "
                               f"day came to SIGKILL it, {time.time() - self.began:.0f} s into the load")
        service.kill()
        self.killed.setdefault(name, []).append(time.time())

    def restart(self, name: str, after: float = 0.0) -> None:
        self.kill(name)
        time.sleep(after)
        self.services[name].start()

    def wait_for(self, at: float) -> None:
        """Until `at` seconds into the load."""
        time.sleep(max(0.0, self.began + at - time.time()))

    def fault(self, at: float, what: str) -> None:
        self.wait_for(at)
        self.report.faults.append((time.time() - self.began, what))

    def cut_off(self, name: str, seconds: float, why: str) -> None:
        """Cut `name`'s link (its namespace's, or the bridge's to ZooKeeper) and heal it `seconds` later, while the
        day goes on."""
        self.report.faults.append((time.time() - self.began, f"cut {name} off {why} for {seconds:.0f} s"))
        if name == "bridge":
            assert self.proxy is not None
            cut, heal = self.proxy.cut, self.proxy.restore
        else:
            cut, heal = self.spaces[name].cut, self.spaces[name].heal

        def healed() -> None:
            heal()
            self.report.faults.append((time.time() - self.began, f"{name} healed"))

        cut()
        timer = threading.Timer(seconds, healed)
        timer.start()
        self.timers.append(timer)

    def partitions(self) -> None:
        """The network's faults (issue 48), overlapping the others, at fixed shares of the load's time."""
        t = self.scale.seconds
        for share, name, seconds, why in (
                (0.45, "worker-2", WORKER_SESSION + 4, "from everything, past its group session"),
                (0.55, "B", SESSION + 3, "from everything, past its ZooKeeper session"),
                (0.60, "bridge", SESSION + 3, "from ZooKeeper alone, past its session"),
                (0.75, "n3", SESSION + 3, "from everything, past its ZooKeeper session"),
                (0.85, "executor", 3.0, "from everything, shorter than a job's timeout")):
            self.wait_for(share * t)
            self.cut_off(name, seconds, why)
        for timer in self.timers:
            timer.join()

    def shard_leader(self) -> str:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.cluster.topology.zookeeper_hosts)
        zk.start(timeout=30)
        try:
            data, _ = zk.get(f"{self.root}/js/election/leader")
        finally:
            zk.stop()
            zk.close()
        return f"n{data.decode().split(':')[0].rsplit('.', 1)[1]}"

    def bad_day(self) -> None:
        """The faults, overlapping, at fixed shares of the load's time."""
        t = self.scale.seconds
        self.fault(0.10 * t, "SIGKILL worker-1")
        self.restart("worker-1", after=1.0)
        self.fault(0.20 * t, "SIGKILL broker kafka-1")
        broker = next(s for s in self.cluster.servers() if s.name == "kafka-1")
        down_at = time.time()
        self.cluster.kill(broker)
        for _ in range(3):  # until KRaft fences the broker, admin requests sent to it fail: "node not ready"
            made = tribunal("topics", "create", env=self.env(), check=False, timeout=120)
            if made.returncode:
                self.exited.append(f"topics create exited {made.returncode} while a broker was down: "
                                   f"{made.stderr[-500:]}")
        self.fault(0.20 * t + 2, "SIGKILL worker-2 (started again while the broker is down)")
        self.restart("worker-2")
        self.fault(0.20 * t + 5, "SIGKILL the ticker (started again while the broker is down)")
        self.restart("ticker")
        time.sleep(max(0.0, down_at + self.scale.broker_down - time.time()))
        self.cluster.start(broker)
        self.report.faults.append((time.time() - self.began, "broker kafka-1 back"))
        frozen = next(n for n in ("n1", "n2", "n3") if n != self.shard_leader())
        self.fault(0.50 * t, f"SIGSTOP shard node {frozen} for {SESSION + 4:.0f} s")
        pid = self.services[frozen].proc.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGSTOP)
        leader = self.shard_leader()
        self.fault(0.50 * t + 2, f"SIGKILL the shard leader {leader}")
        self.restart(leader, after=2.0)
        time.sleep(max(0.0, SESSION + 2))
        os.kill(pid, signal.SIGCONT)
        self.fault(0.70 * t, "SIGKILL scheduler A")
        self.restart("A", after=2.0)
        self.fault(0.80 * t, "SIGKILL worker-1 again")
        self.restart("worker-1", after=1.0)

    # -- the load -------------------------------------------------------------------------------------

    def run(self) -> None:
        """The load at its rates for `scale.seconds`, the faults meanwhile; then until every input is decided."""
        s, rng = self.scale, self.rng
        metric_count = int(s.seconds * s.metrics_per_s)
        metrics = [(self.topic("plugin_decider"), f"pool-{rng.randrange(s.pools):02d}".encode(),
                    envelope(rng.choice(["ats", "hadoop", "redis", "spark"]), rng.randrange(101), "plugin_decider"))
                   for _ in range(metric_count)]
        self.began = time.time()
        assigns = []
        for i in range(int(s.seconds * s.assigns_per_s)):
            start = int((self.began + i / s.assigns_per_s) * 1000)
            count = rng.randint(1, 2)
            self.jobs += count
            assigns.append((self.topic(dispatch.DISPATCH_COMMANDS), b"ns", json.dumps({
                "type": "JobsAssigned", "namespace": "ns", "worker": rng.choice(["w1", "w1", "w1", "w2"]),
                "start": start, "end": start + 500,
                "jobs": [{"external_id": f"{i}-{j}", "max_retries": 1, "timeout_ms": 2_000} for j in range(count)]}
                ).encode()))
        threads = [threading.Thread(target=lambda: self.metrics.extend(asyncio.run(
                       produce_all(self.bootstrap, metrics, s.metrics_per_s)))),
                   threading.Thread(target=lambda: asyncio.run(produce_all(self.bootstrap, assigns, s.assigns_per_s))),
                   threading.Thread(target=self.bad_day),
                   *([threading.Thread(target=self.partitions)] if self.network else [])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.report.figures["load seconds"] = round(time.time() - self.began, 1)
        for name in ("worker-1", "worker-2"):
            wait_until_ready(self.worker(name), self.worker(name).starts, timeout=240)

    # -- the checks -----------------------------------------------------------------------------------

    def check(self) -> Report:
        report, s = self.report, self.scale
        report.violations["processes"] = self.exited + [
            f"{name} exited ({service.proc.returncode if service.proc else None})"
            for name, service in self.services.items() if not service.alive]
        expected = s.pools + len(self.metrics)
        decisions = asyncio.run(read_committed(self.bootstrap, self.topic("scaling-decisions"), expected,
                                               timeout=300))
        report.violations["decisions exactly once"] = decision_violations(
            [json.loads(r.value) for r in decisions], self.topic("plugin_decider"), self.metrics, expected)
        _read_until(self.bootstrap, self.topic(dispatch.JOB_OUTCOMES),
                    lambda got: sum(1 for o in got if o.get("final")) >= self.jobs)
        starts = _read_until(self.bootstrap, self.topic(dispatch.JOB_STARTS), lambda got: True)
        # read after the starts, so that every start read has its end here if it ended (the cap check replays both)
        outcomes = _read_until(self.bootstrap, self.topic(dispatch.JOB_OUTCOMES), lambda got: True)
        report.violations["dispatcher caps and final outcomes"] = dispatch_violations(
            [o for o in outcomes if o["type"] != "JobsAccepted"], starts, self.jobs, CAP, {"w1": W1_CAP})
        until_t = time.time()
        for name in ("A", "B", "n1", "n2", "n3", "executor"):  # their run logs end cleanly
            self.services[name].stop(timeout=30)
            self.ended.add(name)
        runs = scheduler_runs(self.home.glob("runs-*.jsonl"), {k: v[-1] for k, v in self.killed.items()}, until_t)
        report.violations["one scheduler per job"] = scheduler_violations(runs)
        published = asyncio.run(read_log(self.bootstrap, [self.topic("scheduler-events"), self.topic("job-events")]))
        report.violations["one bridge publishing at a time"], terms = publisher_violations(published)
        refused = asyncio.run(read_log(self.bootstrap, [self.topic("scheduler-events.dlq"),
                                                        self.topic("job-events.dlq")]))
        shards = check(read(self.home.glob("shard-runs-*.jsonl")), s.tasks, self.began, until_t, self.killed)
        report.violations["one shard node per task"] = [f"{a} / {b}" for a, b in shards.overlaps]
        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=self.env(), check=False, timeout=600)
        agreed = verified.returncode == 0 and "agree" in verified.stdout
        report.violations["replay --verify"] = [] if agreed else [(verified.stdout + verified.stderr)[-2000:]]
        dead = _read_until(self.bootstrap, self.topic(dispatch.DISPATCH_COMMANDS) + ".dlq", lambda got: True)
        task, gap = shards.worst_gap()
        report.figures.update({
            "metrics": len(self.metrics), "decisions": len(decisions), "dispatcher jobs": self.jobs,
            "job starts": len(starts), "late reports refused": sum(d["reason_code"] == "late_report" for d in dead),
            "shard runs": len(shards.runs), "group job runs": sum(len(v) for v in runs.values()),
            "bridge leaderships": len(terms), "stale bridge records refused": sum(
                json.loads(r.value)["reason_code"] == "stale_publisher" for r in refused),
            "longest without a decision (s)": round(_longest_silence(decisions, self.began), 1),
            "longest a shard task went unrun (s)": f"{gap:.1f} (task {task})",
            "verify": verified.stdout.strip().splitlines()[-1] if verified.stdout.strip() else ""})
        return report


def _live_nodes(zk: Any, root: str) -> set[str]:
    data, _ = zk.get(f"{root}/js/live") if zk.exists(f"{root}/js/live") else (b"", None)
    plan = json.loads(data) if data else {}
    return set(plan.get("nodes", {})) if not zk.exists(f"{root}/js/shard") else set()


def _read_until(bootstrap: str, topic: str, enough: Any, timeout: float = 240.0) -> list[dict[str, Any]]:
    """`topic` read_committed from its start, again until `enough(records)` or `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = [json.loads(r.value) for r in asyncio.run(read_committed(bootstrap, topic, 10**9, timeout=3))]
        if enough(got) or time.monotonic() > deadline:
            return got
        time.sleep(2)


def _longest_silence(records: list[Any], after: float) -> float:
    times = sorted(r.timestamp / 1000 for r in records if r.timestamp / 1000 >= after)
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)
