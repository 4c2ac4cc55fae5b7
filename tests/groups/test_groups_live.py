"""Scheduler groups end to end: real ZooKeeper, Kafka, the worker, the bridge and scheduler processes.

Each scheduler process logs every job it starts and stops; the tests check that no job ever ran
on two schedulers at once, that a SIGKILLed scheduler's jobs are re-owned by the others, that
with half the watch events dropped the limits still equal the truth after a snapshot, and that
`tribunal groups rebalance` evens the load through the offline list.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from streams.clients import read_log
from streams.infra.topology import free_ports
from tests.checks import scheduler_runs, scheduler_violations
from tests.helpers import Service, Worker, tribunal, until

JOBS = 12


class Group:
    """One test's group: its ZooKeeper root, its processes, and what they logged."""

    def __init__(self, env: dict[str, str], tmp_path: Path, zookeeper: str, root: str) -> None:
        from kazoo.client import KazooClient

        self.env, self.tmp, self.root = env, tmp_path, root
        self.zk = KazooClient(hosts=zookeeper)
        self.zk.start(timeout=30)
        self.services: dict[str, Service] = {}
        self.killed_at: dict[str, float] = {}

    def path(self, kind: str, name: str = "") -> str:
        return f"{self.root}/g/{kind}" + (f"/{name}" if name else "")

    def start(self, name: str, *args: str) -> Service:
        service = Service(self.env, self.tmp / f"{name}.log", *args)
        service.start()
        self.services[name] = service
        return service

    def bridge(self, *extra: str) -> Service:
        return self.start("bridge", "groups", "bridge", "--root", self.root, "--snapshot-interval", "2",
                          "--session-timeout", "4", *extra)

    def scheduler(self, sid: str) -> Service:
        return self.start(sid, "groups", "scheduler", "--group", "g", "--id", sid, "--root", self.root,
                          "--run-log", str(self.tmp / f"runs-{sid}.jsonl"), "--session-timeout", "4",
                          "--alarm-threshold", "8", "--drain-interval", "0.2")

    def create_jobs(self, count: int) -> None:
        for i in range(count):
            self.zk.ensure_path(self.path("jobs", f"job{i:02d}"))

    def owners(self) -> dict[str, str]:
        from kazoo.exceptions import NoNodeError

        out = {}
        for job in self.zk.get_children(self.path("owners")) if self.zk.exists(self.path("owners")) else []:
            try:
                out[job] = self.zk.get(self.path("owners", job))[0].decode()
            except NoNodeError:
                continue
        return out

    def wait(self, what: str, done: Callable[[], bool], timeout: float = 120) -> None:
        def why() -> str:
            logs = "\n".join(f"--- {n}\n{s.log()[-1500:]}" for n, s in self.services.items())
            return f"{what}; owners {self.owners()}\n{logs}"

        until(done, why, timeout, every=0.3)

    def kill(self, name: str) -> None:
        self.services[name].kill()
        self.killed_at[name] = time.time()

    def runs(self) -> dict[str, list[tuple[float, float, str]]]:
        """Per job, the intervals each scheduler ran it (a killed scheduler's end at its kill)."""
        return scheduler_runs(self.tmp.glob("runs-*.jsonl"), self.killed_at, time.time())

    def close(self) -> None:
        for service in self.services.values():
            service.stop()
        self.zk.stop()
        self.zk.close()


def assert_no_job_ran_twice_at_once(runs: dict[str, list[tuple[float, float, str]]]) -> None:
    violations = scheduler_violations(runs)
    assert not violations, violations[:5]


def scraped(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, labels) -> value, from a Prometheus page on 127.0.0.1:`port`."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(page.read().decode()) for s in f.samples}


def latest(kafka: str, topic: str) -> dict[str, dict[str, Any]]:
    """The latest record per key on `topic`, read_committed."""
    out: dict[str, dict[str, Any]] = {}
    for record in asyncio.run(read_log(kafka, [topic])):
        out[record.key.decode()] = json.loads(record.value)
    return out


G = TypeVar("G", bound=Group)


def with_worker(kind: type[G], env: dict[str, str], tmp_path: Path, zookeeper: str, unique: str) -> G:
    """A test's group of `kind` on its own topics (made here) and root, a worker folding them already started."""
    env = {**env, "ZOOKEEPER_HOSTS": zookeeper}
    tribunal("topics", "create", env=env)
    g = kind(env, tmp_path, zookeeper, f"/{unique}")
    g.services["worker"] = Worker(env, tmp_path / "worker.log")
    g.services["worker"].start()
    return g


@pytest.fixture
def group(worker_env: dict[str, str], zookeeper: str, unique: str, tmp_path: Path) -> Iterator[Group]:
    g = with_worker(Group, worker_env, tmp_path, zookeeper, unique)
    try:
        yield g
    finally:
        g.close()


def test_a_killed_schedulers_jobs_are_reowned_and_no_job_runs_twice(group: Group, kafka: str, unique: str) -> None:
    group.bridge()
    for sid in "ABC":
        group.scheduler(sid)
    group.create_jobs(JOBS)
    group.wait("every job is owned", lambda: len(group.owners()) == JOBS)
    assert set(group.owners().values()) <= {"A", "B", "C"}

    victim = max("ABC", key=lambda s: list(group.owners().values()).count(s))
    group.kill(victim)
    group.wait(f"{victim}'s jobs are re-owned",
               lambda: len(group.owners()) == JOBS and victim not in group.owners().values(), timeout=90)

    def limits_agree() -> bool:
        health = latest(kafka, f"{unique}.group-health").get("g", {})
        return health.get("K") == JOBS and health.get("S") == 2 and health.get("orphans") == []

    group.wait("group-health shows the truth", limits_agree, timeout=60)
    shown = json.loads(tribunal("groups", "state", "--group", "g", env=group.env).stdout)
    assert (shown["K"], shown["S"], sorted(shown["schedulers"])) == (JOBS, 2, sorted(set("ABC") - {victim}))
    limits = latest(kafka, f"{unique}.rejection-limits")
    assert limits[f"g/{victim}"]["live"] is False
    owned = list(group.owners().values())
    for sid in sorted(set("ABC") - {victim}):
        assert limits[f"g/{sid}"]["X"] == owned.count(sid), limits[f"g/{sid}"]
        assert limits[f"g/{sid}"]["N"] == 1 + JOBS // 1  # S - n = 2 - 1
    assert_no_job_ran_twice_at_once(group.runs())


def test_with_half_the_watch_events_lost_the_next_snapshot_restores_the_truth(group: Group, kafka: str,
                                                                              unique: str) -> None:
    [metrics_port] = free_ports(1)
    bridge = group.bridge("--drop-watch-events", "0.5", "--metrics-port", str(metrics_port))
    for sid in "AB":
        group.scheduler(sid)
    group.create_jobs(JOBS)
    group.wait("every job is owned", lambda: len(group.owners()) == JOBS, timeout=150)
    group.kill("A")
    group.wait("A's jobs are re-owned", lambda: len(group.owners()) == JOBS and "A" not in group.owners().values(),
               timeout=120)

    def truth() -> bool:
        health = latest(kafka, f"{unique}.group-health").get("g", {})
        limits = latest(kafka, f"{unique}.rejection-limits")
        owned = list(group.owners().values())
        return (health.get("K") == JOBS and health.get("S") == 1 and health.get("orphans") == []
                and limits.get("g/B", {}).get("X") == owned.count("B") == JOBS
                and limits.get("g/A", {}).get("live") is False)

    group.wait("the limits equal the truth", truth, timeout=60)
    assert "dropped (--drop-watch-events)" in bridge.log()
    logged = bridge.log().count("dropped (--drop-watch-events)")
    shown = scraped(metrics_port)  # what the bridge's /metrics says of the same (it goes on: at least as many)
    assert shown[("tribunal_bridge_dropped_total", ())] >= logged > 0
    assert shown[("tribunal_bridge_events_total", (("topic", "scheduler-events"), ("type", "MembershipSnapshot")))] >= 1
    assert shown[("tribunal_bridge_leading", ())] == 1
    health = latest(kafka, f"{unique}.group-health")["g"]
    assert health["capacity_ok"] is True
    assert_no_job_ran_twice_at_once(group.runs())


def test_rebalance_moves_jobs_to_a_newcomer_through_the_offline_list(group: Group, unique: str) -> None:
    group.bridge()
    for sid in "AB":
        group.scheduler(sid)
    group.create_jobs(JOBS)
    group.wait("every job is owned", lambda: len(group.owners()) == JOBS)
    group.scheduler("C")
    group.wait("C is registered", lambda: group.zk.exists(group.path("schedulers", "C")) is not None)
    result = tribunal("groups", "rebalance", "--group", "g", "--root", group.root, "--timeout", "120", env=group.env)
    assert "is balanced" in result.stdout
    counts = [list(group.owners().values()).count(s) for s in "ABC"]
    assert sum(counts) == JOBS and max(counts) - min(counts) <= 1, counts
    assert not group.zk.get_children(group.path("offline"))
    assert_no_job_ran_twice_at_once(group.runs())
