"""Shard nodes under real network partitions (issue 47): each node in a network namespace of its own, cut from
ZooKeeper and Kafka together by its link going down (`tests.netns`), its runs processes with children of their
own (`--command`), the stack on the bridge's address.

One after another, each time on a node other than the leader: a cut shorter than the session (nothing moves,
nothing runs twice, the node keeps its incarnation); a cut past the session (its processes are gone before its
session expires on the server, so before the leader may give its tasks away; they run on the others; healed,
it rejoins as a new incarnation); a SIGSTOP past the session (the guardian ends its runs when its lease runs
out); a SIGKILL (its processes gone within a second); then the leader cut off (it stops leading and running
before its session expires; another is elected). Throughout, /proc is sampled every 50 ms: no task ever has
live processes on two nodes at once; after each fault no process of the victim's is left, and every task it
held runs again elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Stack, env_of
from tests.helpers import Worker, tribunal, until
from tests.netns import Namespace, Network
from tests.shards.test_commands_live import NODES, TASKS, CommandJobSet, Watch, running
from tests.shards.test_nodes_live import job_set_of

SESSION = 4.0  # the nodes' --session-timeout; ZooKeeper (tickTime 2 s) expires a session up to a tick later
COMMAND = "sh -c 'sleep 30 & sleep 30; wait'"


class PartitionedJobSet(CommandJobSet):
    """Three nodes, each in a namespace of its own; runs that would last 30 s, so a fault always finds some."""

    command = COMMAND
    spaces: dict[str, Namespace]

    def wrap(self, node: str) -> list[str]:
        return self.spaces[node].wrap([])

    def incarnation(self, node: str) -> int | None:
        stat = self.zk.exists(f"{self.root}/js/live/{node}")
        return None if stat is None else int(stat.czxid)

    def epoch(self) -> int:
        data, _ = self.zk.get(f"{self.root}/js/live")
        return int(json.loads(data)["epoch"])


@pytest.fixture
def job_set(net_stack: Stack, network: Network, unique: str, tmp_path: Path) -> Iterator[PartitionedJobSet]:
    env = {**env_of(net_stack.bootstrap, unique, tmp_path), "ZOOKEEPER_HOSTS": net_stack.zookeeper}
    tribunal("topics", "create", env=env)
    worker = Worker(env, tmp_path / "worker.log")
    worker.start()
    spaces = {node: network.namespace() for node in NODES}
    try:
        for shards in job_set_of(PartitionedJobSet, env, tmp_path, net_stack.zookeeper, unique):
            shards.spaces = spaces
            yield shards
    finally:
        worker.stop()
        for space in spaces.values():
            space.heal()


class Expiry:
    """When the node's live entry vanished on the server (its session expired), from a watch of the test's own."""

    def __init__(self, job_set: PartitionedJobSet, node: str) -> None:
        self.at: float | None = None
        self.seen = threading.Event()

        def gone(event: Any) -> None:
            if event.type == "DELETED":
                self.at = time.monotonic()
                self.seen.set()

        assert job_set.zk.exists(f"{job_set.root}/js/live/{node}", watch=gone) is not None

    def after(self, since: float) -> float:
        assert self.at is not None
        return self.at - since


def test_partitions_freezes_and_kills_leave_no_orphan_and_never_a_task_on_two_nodes(
        job_set: PartitionedJobSet, tmp_path: Path) -> None:
    state = (tmp_path / "state").resolve()
    tribunal("shards", "tasks", "--job-set", "js", str(TASKS), env=job_set.env)
    for node in NODES:
        job_set.start(node)
    job_set.settled(set(NODES), timeout=120)
    watch = Watch(state)
    watch.start()
    figures: dict[str, float] = {}

    def told(node: str) -> str:
        """What a wait that timed out shows: the runs seen, the plan in ZooKeeper, the node's own log and run log."""
        runs = job_set.tmp / f"runs-{node}.jsonl"
        tail = runs.read_text()[-1500:] if runs.exists() else ""
        return (f"{node}: {running(state)}; plan {job_set.zk.get(f'{job_set.root}/js/live')[0].decode()}\n"
                f"--- {node}'s log\n{job_set.nodes[node].log()[-4000:]}\n--- its run log\n{tail}")

    def victim_running() -> tuple[str, set[int]]:
        plan = job_set.settled(set(NODES))
        victim = next(n for n in NODES if n != job_set.leader())
        theirs = {t for first, last in plan["ranges"][victim] for t in range(first, last + 1)}
        until(lambda: len(running(state).get(victim, {})) >= 2, lambda: f"{victim}'s runs: {told(victim)}",
              timeout=30, every=0.05)
        return victim, theirs

    def runs_elsewhere(victim: str, theirs: set[int], since: float) -> float:
        until(lambda: theirs <= {t for n, r in running(state).items() if n != victim for t in r},
              lambda: f"{sorted(theirs)} running elsewhere: { {n: sorted(r) for n, r in running(state).items()} }",
              timeout=60, every=0.05)
        return time.monotonic() - since

    def stopped_before_expiry(node: str, fault: Callable[[], object], name: str) -> float:
        """Make the fault; the node's runs must be gone before its session expires on the server (only then may
        the leader give its tasks away). When the fault began (monotonic); `name_to_stopped`/`_to_expiry` figures."""
        expiry = Expiry(job_set, node)
        fault()
        began = time.monotonic()
        until(lambda: node not in running(state), lambda: f"{node}'s runs stopped: {running(state)}",
              timeout=2 * SESSION, every=0.01)
        figures[f"{name}_to_stopped"] = time.monotonic() - began
        assert expiry.seen.wait(3 * SESSION), f"{node}'s session expired on the server"
        figures[f"{name}_to_expiry"] = expiry.after(began)
        assert figures[f"{name}_to_expiry"] > figures[f"{name}_to_stopped"], figures
        return began

    try:
        # a cut shorter than the session: nothing moves
        victim, theirs = victim_running()
        epoch, incarnation = job_set.epoch(), job_set.incarnation(victim)
        watch.owners.clear()
        job_set.spaces[victim].cut()
        time.sleep(1.0)
        job_set.spaces[victim].heal()
        time.sleep(2 * SESSION)
        assert (job_set.epoch(), job_set.incarnation(victim)) == (epoch, incarnation)
        assert all(watch.owners.get(t, {victim}) == {victim} for t in theirs), watch.owners

        # a cut past the session: processes gone before the session expires on the server; the tasks move
        victim, theirs = victim_running()
        incarnation = job_set.incarnation(victim)
        cut = stopped_before_expiry(victim, job_set.spaces[victim].cut, "partition")
        figures["partition_to_elsewhere"] = runs_elsewhere(victim, theirs, cut)
        time.sleep(2)
        job_set.spaces[victim].heal()
        job_set.settled(set(NODES))
        assert job_set.incarnation(victim) not in (None, incarnation)  # it came back as a new incarnation
        until(lambda: victim in running(state), lambda: f"the healed node running tasks again: {told(victim)}",
              timeout=60)

        # a freeze past the session: the guardian ends the runs when the lease runs out
        victim, theirs = victim_running()
        pid = job_set.nodes[victim].proc.pid  # type: ignore[union-attr]
        try:
            frozen = stopped_before_expiry(victim, lambda: os.kill(pid, signal.SIGSTOP), "freeze")
            runs_elsewhere(victim, theirs, frozen)
        finally:
            os.kill(pid, signal.SIGCONT)
        job_set.settled(set(NODES))

        # a SIGKILL: its processes end with it
        victim, theirs = victim_running()
        job_set.kill(victim)
        killed = time.monotonic()
        until(lambda: victim not in running(state), lambda: f"orphans of {victim}: {running(state).get(victim)}",
              timeout=5, every=0.01)
        figures["kill_to_gone"] = time.monotonic() - killed
        runs_elsewhere(victim, theirs, killed)
        job_set.start(victim)
        job_set.settled(set(NODES))

        # the leader cut off (issue 48): it stops leading and running before its session expires; another node
        # is elected and moves its tasks; healed, it rejoins as a follower
        leader = job_set.leader()
        plan = job_set.settled(set(NODES))
        theirs = {t for first, last in plan["ranges"][leader] for t in range(first, last + 1)}
        until(lambda: leader in running(state), "the leader running tasks", timeout=30, every=0.05)
        cut = stopped_before_expiry(leader, job_set.spaces[leader].cut, "leader_cut")
        runs_elsewhere(leader, theirs, cut)
        assert job_set.leader() != leader
        job_set.spaces[leader].heal()
        job_set.settled(set(NODES))
        assert "no longer leads job set js" in job_set.nodes[leader].log()
    finally:
        watch.done.set()
        watch.join()
    print(figures)
    assert figures["kill_to_gone"] < 1.0, figures
    assert watch.samples > 100 and watch.twice == [], watch.twice[:5]
    for node in NODES:
        assert "Traceback" not in job_set.nodes[node].log(), job_set.nodes[node].log()[-3000:]
