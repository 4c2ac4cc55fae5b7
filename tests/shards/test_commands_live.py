"""Shard nodes running real commands (issue 47; seed 003's orphans): real ZooKeeper, Kafka and worker, three node
processes whose task runs are processes with children of their own. A node SIGKILLed leaves no process of its
runs behind (within a second), its tasks run on the others, and no task has live processes on two nodes at once,
judged from /proc every 50 ms."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from streams.processes.guardian import GUARDIAN
from tests.helpers import Service, Worker, tribunal, until
from tests.shards.test_nodes_live import JobSet, job_set_of

TASKS = 12
NODES = ("n1", "n2", "n3")
# a run with a child of its own and a grandchild that leaves the session: all three must go with the node
COMMAND = "sh -c '(setsid sleep 6 &); sleep 6 & wait'"


def running(state: Path) -> dict[str, dict[int, set[int]]]:
    """node -> task -> pids of the live processes of its runs, from /proc (their environment says whose)."""
    found: dict[str, dict[int, set[int]]] = {}
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if env.get(GUARDIAN, "").startswith(str(state)) and process.status() != psutil.STATUS_ZOMBIE:
                found.setdefault(env["TRIBUNAL_NODE"], {}).setdefault(int(env["TRIBUNAL_TASK"]), set()).add(
                    process.pid)
        except (psutil.Error, KeyError, ValueError):
            continue
    return found


class Watch(threading.Thread):
    """Samples /proc every 50 ms: every moment a task had live processes on two nodes, and which nodes ran each
    task's processes since `since` was last reset."""

    def __init__(self, state: Path) -> None:
        super().__init__(daemon=True)
        self.state, self.twice, self.samples = state, [], 0
        self.owners: dict[int, set[str]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            seen = running(self.state)
            self.samples += 1
            tasks: dict[int, list[str]] = {}
            for node, runs in seen.items():
                for task in runs:
                    tasks.setdefault(task, []).append(node)
                    self.owners.setdefault(task, set()).add(node)
            self.twice += [(time.time(), task, nodes) for task, nodes in tasks.items() if len(nodes) > 1]


class CommandJobSet(JobSet):
    tasks = TASKS

    command = COMMAND

    def start(self, node: str) -> None:
        service = Service(self.env, self.tmp / f"{node}.log", "shards", "node", "--job-set", "js", "--id", node,
                          "--address", self.address(node), "--run-log", str(self.tmp / f"runs-{node}.jsonl"),
                          "--period", "1", "--command", self.command, "--state-dir", str(self.tmp / "state"),
                          "--term-grace", "1", "--grace", "1", "--snapshot-interval", "3", "--session-timeout", "4",
                          "--zookeeper", self.zookeeper, "--shard-root", self.root, wrap=self.wrap(node))
        service.start()
        self.nodes[node] = service

    def wrap(self, node: str) -> list[str]:
        """What runs the node's process (`Namespace.wrap` where the node has a network of its own)."""
        return []


@pytest.fixture
def job_set(worker: Worker, worker_env: dict[str, str], tmp_path: Path, zookeeper: str, unique: str
            ) -> Iterator[CommandJobSet]:
    yield from job_set_of(CommandJobSet, worker_env, tmp_path, zookeeper, unique)


@pytest.mark.chaos
def test_a_killed_nodes_task_processes_end_with_it_and_its_tasks_run_elsewhere_never_on_two_nodes(
        job_set: CommandJobSet, worker_env: dict[str, str], tmp_path: Path) -> None:
    state = (tmp_path / "state").resolve()
    tribunal("shards", "tasks", "--job-set", "js", str(TASKS), env=worker_env)
    for node in NODES:
        job_set.start(node)
    first = job_set.settled(set(NODES), timeout=120)
    watch = Watch(state)
    watch.start()
    try:
        victim = next(n for n in NODES if n != job_set.leader())
        theirs = {t for first_task, last in first["ranges"][victim] for t in range(first_task, last + 1)}
        until(lambda: len(running(state).get(victim, {})) >= 2 and all(
            len(pids) == 3 for pids in running(state)[victim].values()), lambda: f"{victim}'s runs, each three "
            f"processes: {running(state).get(victim)}", timeout=30, every=0.05)
        job_set.kill(victim)
        killed = time.monotonic()
        until(lambda: victim not in running(state), lambda: f"orphans of {victim}: {running(state).get(victim)}",
              timeout=5, every=0.01)
        gone = time.monotonic() - killed
        job_set.settled(set(NODES) - {victim})
        until(lambda: theirs <= {t for r in running(state).values() for t in r},
              lambda: f"{sorted(theirs)} running elsewhere: { {n: sorted(r) for n, r in running(state).items()} }",
              timeout=30)
        job_set.start(victim)  # back, a new incarnation: it takes tasks again once the others let them go
        job_set.settled(set(NODES))
        until(lambda: victim in running(state), "the restarted node running tasks", timeout=60)
    finally:
        watch.done.set()
        watch.join()
    assert gone < 1.0, gone
    assert watch.samples > 50 and watch.twice == [], watch.twice[:5]
    ends = [json.loads(line) for node in NODES for line in (tmp_path / f"runs-{node}.jsonl").read_text().splitlines()]
    done = [e for e in ends if e["event"] == "end" and e["outcome"] == "done"]
    assert done and all(e["status"] == 0 for e in done), done[:3]  # the process's exit status, with the run's end
    for node in NODES:
        assert "Traceback" not in job_set.nodes[node].log(), job_set.nodes[node].log()[-3000:]
