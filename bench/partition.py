"""Shard nodes cut off by a real partition, and frozen (issue 47): how soon a node's task processes stop, how soon
its session expires on the server, how soon another node runs its tasks.

The harness of `tests/shards/test_partitions_live.py`: a bridge of its own, three `tribunal shards node --command`
processes each in a network namespace (runs that would last 30 s, each with a child of its own), the stack on
the bridge's address, the worker on the host. Each round takes a node other than the leader, cuts its link (or,
`--freeze`, SIGSTOPs it), and measures from that moment: its last task process gone (/proc every 10 ms), its live
entry deleted on the server (a ZooKeeper watch: the session expired; only then may the leader give its tasks away),
and every task it held running on another node. Then it heals (SIGCONT) and waits for the plan to take it back.
The bound the node keeps is its lease, 0.8 of the session timeout after its last answer from ZooKeeper: what it
measures is compared with the session timeout (4 s).

Needs root (ip netns). Run: `.venv/bin/python bench/partition.py [--rounds 6]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' harness

from tests import netns
from tests.conftest import env_of, local_stack
from tests.helpers import Worker, tribunal, until
from tests.shards.test_commands_live import NODES, TASKS, running
from tests.shards.test_partitions_live import SESSION, Expiry, PartitionedJobSet


def round_of(job_set: PartitionedJobSet, state: Path, freeze: bool) -> dict[str, float]:
    plan = job_set.settled(set(NODES))
    victim = next(n for n in NODES if n != job_set.leader())
    theirs = {t for first, last in plan["ranges"][victim] for t in range(first, last + 1)}
    until(lambda: len(running(state).get(victim, {})) >= 2, "the victim's runs", timeout=30, every=0.05)
    expiry = Expiry(job_set, victim)
    pid = job_set.nodes[victim].proc.pid  # type: ignore[union-attr]
    if freeze:
        os.kill(pid, signal.SIGSTOP)
    else:
        job_set.spaces[victim].cut()
    began = time.monotonic()
    try:
        until(lambda: victim not in running(state), "its runs stopped", timeout=3 * SESSION, every=0.01)
        stopped = time.monotonic() - began
        until(lambda: theirs <= {t for n, r in running(state).items() if n != victim for t in r},
              "its tasks running elsewhere", timeout=60, every=0.01)
        elsewhere = time.monotonic() - began
        assert expiry.seen.wait(3 * SESSION), "the session expired"
    finally:
        if freeze:
            os.kill(pid, signal.SIGCONT)
        else:
            job_set.spaces[victim].heal()
    job_set.settled(set(NODES))
    return {"stopped": stopped, "expired": expiry.after(began), "elsewhere": elsewhere}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each kind (cut, freeze)")
    args = parser.parse_args()
    reason = netns.unavailable()
    if reason is not None:
        sys.exit(f"network namespaces cannot be made here: {reason}")
    network = netns.Network()
    results: dict[str, list[dict[str, float]]] = {"cut": [], "freeze": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            stack_runs = local_stack(home / "stack", network.host)
            stack = next(stack_runs)
            env = {**env_of(stack.bootstrap, "bench", home), "ZOOKEEPER_HOSTS": stack.zookeeper}
            tribunal("topics", "create", env=env)
            worker = Worker(env, home / "worker.log")
            worker.start()
            job_set = PartitionedJobSet(env, home, stack.zookeeper, "/bench")
            job_set.spaces = {node: network.namespace() for node in NODES}
            try:
                tribunal("shards", "tasks", "--job-set", "js", str(TASKS), env=env)
                for node in NODES:
                    job_set.start(node)
                job_set.settled(set(NODES), timeout=120)
                for i in range(args.rounds * 2):
                    kind = "freeze" if i % 2 else "cut"
                    results[kind].append(round_of(job_set, (home / "state").resolve(), kind == "freeze"))
                    print(kind, {k: round(v, 2) for k, v in results[kind][-1].items()}, file=sys.stderr)
            finally:
                job_set.close()
                worker.stop()
                next(stack_runs, None)
    finally:
        network.close()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
          f"session timeout {SESSION:g} s, lease {0.8 * SESSION:g} s")
    out = {}
    for kind, rounds in results.items():
        for figure in ("stopped", "expired", "elsewhere"):
            values = [r[figure] for r in rounds]
            out[f"{kind} -> {figure} (s)"] = {"median": round(statistics.median(values), 2),
                                              "max": round(max(values), 2)}
        out[f"{kind}: stopped before expiry, every round"] = all(r["stopped"] < r["expired"] for r in rounds)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
