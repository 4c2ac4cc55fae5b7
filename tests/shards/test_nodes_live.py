"""Shard nodes under chaos: real ZooKeeper, Kafka and worker, four node processes, the leader among them.

One after another: SIGKILL a node, SIGKILL the leader, SIGSTOP a node past its session timeout
(a GC pause) and SIGCONT it, cut a node's network to ZooKeeper past its session and restore it;
each time the live set shrinks to three, the node comes back, and it grows to four again. Then
the checker reads every node's run log: no task held by two nodes at once, and none left unrun
for longer than the session timeout plus one reshard.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from streams.shards.check import check, read
from tests.helpers import Service, Worker, read_committed, tribunal, until
from tests.shards.proxy import Proxy

TASKS = 120
SESSION = 4.0  # seconds; ZooKeeper (tickTime 2 s) expires sessions on tick boundaries: up to 2 s later
GRACE = 1.0
PERIOD = 1.0
RESHARD = 4.0  # the budget for one reshard: the leader's publish, the fold, every ack, the release (seconds)
NODES = ("n1", "n2", "n3", "n4")


class JobSet:
    tasks = TASKS  # the job set's task count, as `shards tasks` set it

    def __init__(self, env: dict[str, str], tmp: Path, zookeeper: str, root: str) -> None:
        from kazoo.client import KazooClient

        self.env, self.tmp, self.root, self.zookeeper = env, tmp, root, zookeeper
        self.zk = KazooClient(hosts=zookeeper)
        self.zk.start(timeout=30)
        self.nodes: dict[str, Service] = {}
        self.died: dict[str, list[float]] = {}
        self.proxy = Proxy(zookeeper)

    def address(self, node: str) -> str:
        return f"10.0.0.{node[1:]}:9000"

    def start(self, node: str) -> None:
        hosts = self.proxy.address if node == "n4" else self.zookeeper
        service = Service(self.env, self.tmp / f"{node}.log", "shards", "node", "--job-set", "js", "--id", node,
                          "--address", self.address(node), "--run-log", str(self.tmp / f"runs-{node}.jsonl"),
                          "--period", str(PERIOD), "--duration", "0.3", "--grace", str(GRACE),
                          "--snapshot-interval", "3", "--session-timeout", str(SESSION), "--zookeeper", hosts,
                          "--shard-root", self.root)
        service.start()
        self.nodes[node] = service

    def kill(self, node: str) -> None:
        self.nodes[node].kill()
        self.died.setdefault(node, []).append(time.time())

    def leader(self) -> str:
        data, _ = self.zk.get(f"{self.root}/js/election/leader")
        return {self.address(n): n for n in NODES}[data.decode()]

    def settled(self, nodes: set[str], timeout: float = 60.0) -> dict[str, Any]:
        """Until the plan written to /live covers exactly `nodes` and no pause is held."""
        last: dict[str, Any] = {}

        def plan() -> dict[str, Any] | None:
            data, _ = self.zk.get(f"{self.root}/js/live") if self.zk.exists(f"{self.root}/js/live") else (b"", None)
            last.clear()
            last.update(json.loads(data) if data else {})
            if set(last.get("nodes", {})) == nodes and last.get("tasks") == self.tasks \
                    and not self.zk.exists(f"{self.root}/js/shard"):
                return dict(last)
            return None

        def why() -> str:
            logs = "\n".join(f"--- {n}\n{s.log()[-3000:]}" for n, s in self.nodes.items())
            return f"a settled plan on {sorted(nodes)}; last plan {last}\n{logs}"

        settled: dict[str, Any] = until(plan, why, timeout, every=0.2)
        return settled

    def close(self) -> None:
        for service in self.nodes.values():
            if service.alive and service.proc is not None:
                os.kill(service.proc.pid, signal.SIGCONT)
            service.stop(timeout=20)
        self.proxy.close()
        self.zk.stop()
        self.zk.close()


J = TypeVar("J", bound=JobSet)


def job_set_of(kind: type[J], worker_env: dict[str, str], tmp_path: Path, zookeeper: str, unique: str) -> Iterator[J]:
    """A fixture's job set of `kind`, under a ZooKeeper root of the test's own, its nodes stopped at the end."""
    shards = kind(worker_env, tmp_path, zookeeper, f"/{unique}")
    try:
        yield shards
    finally:
        shards.close()


@pytest.fixture
def job_set(worker: Worker, worker_env: dict[str, str], tmp_path: Path, zookeeper: str, unique: str
            ) -> Iterator[JobSet]:
    yield from job_set_of(JobSet, worker_env, tmp_path, zookeeper, unique)


def test_no_task_runs_twice_through_kills_a_gc_pause_and_a_partition(job_set: JobSet, worker_env: dict[str, str],
                                                                     kafka: str, unique: str) -> None:
    tribunal("shards", "tasks", "--job-set", "js", str(TASKS), env=worker_env)
    for node in NODES:
        job_set.start(node)
    first = job_set.settled(set(NODES), timeout=120)
    assert [r for n in NODES for r in first["ranges"][n]] == [[1, 30], [31, 60], [61, 90], [91, 120]]
    since = time.time() + PERIOD
    time.sleep(3)

    victim = next(n for n in ("n1", "n2", "n3") if n != job_set.leader())
    job_set.kill(victim)  # a node
    job_set.settled(set(NODES) - {victim})
    job_set.start(victim)
    job_set.settled(set(NODES))

    leader = job_set.leader()
    job_set.kill(leader)  # the leader
    job_set.settled(set(NODES) - {leader})
    assert job_set.leader() != leader
    job_set.start(leader)
    job_set.settled(set(NODES))

    time.sleep(2)  # the frozen node has runs under way when it freezes
    frozen = next(n for n in ("n1", "n2", "n3") if n != job_set.leader())
    pid = job_set.nodes[frozen].proc.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)  # a GC pause past the session timeout
    job_set.settled(set(NODES) - {frozen})
    time.sleep(2)
    os.kill(pid, signal.SIGCONT)
    job_set.settled(set(NODES))

    if job_set.leader() == "n4":  # the partitioned node should not be the leader, for a clean test of the node
        job_set.kill("n4")
        job_set.settled(set(NODES) - {"n4"})
        job_set.start("n4")
        job_set.settled(set(NODES))
    time.sleep(2)
    job_set.proxy.cut()  # n4's network to ZooKeeper, not to Kafka
    job_set.settled(set(NODES) - {"n4"})
    time.sleep(2)
    job_set.proxy.restore()
    job_set.settled(set(NODES))
    time.sleep(3)
    until = time.time()

    for service in job_set.nodes.values():
        service.stop(timeout=20)
    found = check(read(job_set.tmp.glob("runs-*.jsonl")), TASKS, since, until, job_set.died)
    summary = (f"{len(found.runs)} runs {found.outcomes}, {found.refused} refused, worst gap {found.worst_gap()}, "
               f"{sum(r.failover for r in found.runs)} failover runs")
    print(summary)
    assert not found.overlaps, f"{found.overlaps[:5]} ({summary})"
    task, gap = found.worst_gap()
    assert gap <= SESSION + 2 + GRACE + PERIOD + RESHARD, f"task {task} went unrun for {gap:.1f} s ({summary})"
    assert sum(r.failover for r in found.runs) > 0  # a lost node's tasks were run at once by their new owners
    assert len(found.runs) > TASKS * 20

    plans = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.shard-plans", 10**6,
                                                                     timeout=5))]
    epochs = [p["epoch"] for p in plans if p["job_set"] == "js"]
    assert epochs == sorted(epochs) and len(set(epochs)) >= 9
