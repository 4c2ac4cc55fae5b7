"""Shard plans: how long a reshard takes live, what a plan costs to compute, and what a join moves.

1. Reshard latency (a fresh local stack, `tribunal worker`, three `tribunal shards node` processes):
   20 changes of the live set, alternately a fourth node joining (started) and leaving. A join is
   timed from its `/live` entry appearing to the pause lifted with the plan that has it (published,
   acknowledged by every node, released, `/shard` removed); a loss is a SIGKILL, timed from its
   `/live` entry's expiry (the session timeout after the kill, as ZooKeeper decides) to the pause
   lifted, and from the kill itself, less the session timeout. The leader waits `--grace` after a loss
   before lifting the pause: that is in the figure, and said.
2. Plan computation for 100,000 tasks over 1,000 nodes: each strategy alone, and the fold's whole
   step (a node joining a job set of 999) from record bytes to the encoded plan.
3. Tasks moved when a node joins L nodes (100,000 tasks), scope against ring, beside T/(L+1).
Run: `.venv/bin/python bench/shards.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from e2e import TRIBUNAL, _p99, start_worker, worker_env  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from streams.core import shards
from streams.core.shards import plans
from streams.core.source import SourceRecord

SESSION = 4.0


class Watch:
    """The bench's own view of the job set in ZooKeeper: when /live entries come and go, when the pause lifts."""

    def __init__(self, hosts: str, root: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=hosts)
        self.zk.start(timeout=30)
        self.root = root
        self.changed: dict[tuple[str, bool], float] = {}  # (node, present) -> when first seen so
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.zk.ensure_path(f"{root}/live")
        self.zk.ChildrenWatch(f"{root}/live", self._children)

    def _children(self, children: list[str]) -> None:
        now = time.monotonic()
        with self.lock:
            for n in set(children) - self.seen:
                self.changed[(n, True)] = now
            for n in self.seen - set(children):
                self.changed[(n, False)] = now
            self.seen = set(children)

    def settled(self, nodes: set[str], timeout: float = 60.0) -> float:
        """When (monotonic) the plan written to /live first covered exactly `nodes` with no pause held."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data, _ = self.zk.get(f"{self.root}/live")
            plan = json.loads(data) if data else {}
            if set(plan.get("nodes", {})) == nodes and not self.zk.exists(f"{self.root}/shard"):
                return time.monotonic()
            time.sleep(0.005)
        raise TimeoutError(f"never settled on {sorted(nodes)}")


def node(env: dict[str, str], name: str, root: str, home: Path, grace: float) -> subprocess.Popen[bytes]:
    with (home / f"{name}.log").open("ab") as log:
        return subprocess.Popen([TRIBUNAL, "shards", "node", "--job-set", "js", "--id", name, "--address",
                                 f"10.0.0.{name[1:]}:9000", "--period", "1", "--duration", "0.2", "--grace",
                                 str(grace), "--session-timeout", str(SESSION), "--shard-root", root,
                                 "--snapshot-interval", "10"], env=env, stdout=log, stderr=subprocess.STDOUT)


def reshards(cluster: Any, changes: int, grace: float) -> dict[str, list[float]]:
    home = cluster.topology.home
    env, _ = worker_env(cluster.topology.bootstrap, "shards", home)
    env = {**env, "TRIBUNAL_ZOOKEEPER_HOSTS": cluster.topology.zookeeper_hosts}
    worker = start_worker(env)
    root = "/bench/.shards"
    procs = []
    try:
        subprocess.run([TRIBUNAL, "shards", "tasks", "--job-set", "js", "3000"], env=env, check=True,
                       capture_output=True)
        watch = Watch(cluster.topology.zookeeper_hosts, f"{root}/js")
        procs = [node(env, f"n{i}", root, home, grace) for i in (1, 2, 3)]
        watch.settled({"n1", "n2", "n3"}, timeout=180)
        out: dict[str, list[float]] = {"join": [], "loss": [], "loss_from_kill": []}
        for i in range(changes):
            name = f"n{10 + i // 2}"
            if i % 2 == 0:
                extra = node(env, name, root, home, grace)
                done = watch.settled({"n1", "n2", "n3", name})
                out["join"].append(done - watch.changed[(name, True)])
            else:
                time.sleep(1.0)
                killed = time.monotonic()
                extra.send_signal(signal.SIGKILL)
                extra.wait()
                done = watch.settled({"n1", "n2", "n3"})
                out["loss"].append(done - watch.changed[(name, False)])
                out["loss_from_kill"].append(done - killed - SESSION)
            print(f"  change {i + 1:>2}: {'join' if i % 2 == 0 else 'loss'} {name}: "
                  f"{(out['join'] if i % 2 == 0 else out['loss'])[-1] * 1000:7.0f} ms", flush=True)
        return out
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        worker.terminate()
        worker.wait()


def compute() -> None:
    nodes = {f"node-{i:04d}": f"10.{i // 250}.{i % 250}.1:9000" for i in range(1000)}
    for strategy in plans.STRATEGIES:
        started = time.perf_counter()
        runs = 5
        for _ in range(runs):
            plans.plan(strategy, nodes, 100_000)
        print(f"  {strategy:<6} plan of 100,000 tasks over 1,000 nodes: "
              f"{(time.perf_counter() - started) / runs * 1000:7.1f} ms")
        state = shards.ShardState()
        record = SourceRecord(shards.SHARD_EVENTS, 0, 0, 1, b"js", json.dumps(
            {"type": "NodesSnapshot", "job_set": "js", "nodes": [{"node": n, "address": a}
                                                                  for n, a in list(nodes.items())[:999]]}).encode())
        state, _ = shards.apply(state, record, shards.SHARD_EVENTS)
        record = SourceRecord(shards.SHARD_EVENTS, 0, 1, 2, b"js", json.dumps(
            {"type": "TaskCountSet", "job_set": "js", "tasks": 100_000, "strategy": strategy}).encode())
        state, _ = shards.apply(state, record, shards.SHARD_EVENTS)
        joined = SourceRecord(shards.SHARD_EVENTS, 0, 2, 3, b"js", json.dumps(
            {"type": "NodeJoined", "job_set": "js", "node": "node-0999", "address": nodes["node-0999"]}).encode())
        started = time.perf_counter()
        _, outputs = shards.apply(state, joined, shards.SHARD_EVENTS)
        size = len(outputs[0].value_bytes())
        print(f"  {strategy:<6} fold step (a join into 999 nodes, 100,000 tasks) to encoded plan: "
              f"{(time.perf_counter() - started) * 1000:7.1f} ms, plan record {size / 1000:.0f} kB")


def moved() -> None:
    tasks = 100_000
    print(f"  {'L':>5} {'scope':>8} {'ring':>8} {'T/(L+1)':>8}")
    for count in (1, 2, 3, 5, 10, 30, 100, 300):
        nodes = {f"n{i}": f"10.0.{i // 250}.{i % 250}:9000" for i in range(count)}
        grown = {**nodes, "new": "10.0.9.9:9000"}
        row = [plans.moved(plans.plan(s, nodes, tasks), plans.plan(s, grown, tasks)) for s in ("scope", "ring")]
        print(f"  {count:>5} {row[0]:>8,} {row[1]:>8,} {tasks // (count + 1):>8,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--grace", type=float, default=1.0)
    args = parser.parse_args()
    os.environ.setdefault("TRIBUNAL_LOG_LEVEL", "warning")
    print(describe())
    print("plan computation:")
    compute()
    print("tasks moved when a node joins L nodes (100,000 tasks):")
    moved()
    with local_stack("shards") as cluster:
        print(f"reshards ({args.changes} changes, session timeout {SESSION:g} s, grace {args.grace:g} s):")
        out = reshards(cluster, args.changes, args.grace)
    for kind, label in (("join", "join: /live entry -> pause lifted"),
                        ("loss", "loss: /live entry expired -> pause lifted (grace included)"),
                        ("loss_from_kill", "loss: SIGKILL -> pause lifted, less the session timeout")):
        ms = [s * 1000 for s in out[kind]]
        print(f"  {label:<58} p50 {statistics.median(ms):7.0f} ms  p99 {_p99(ms):7.0f} ms  (n={len(ms)})")


if __name__ == "__main__":
    main()
