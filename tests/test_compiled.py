"""The compiled core and the pure one: which runs, and that both derive the same bytes from the same log.

`make setup` compiles `streams/core` with mypyc where a C compiler is installed, so the suite runs the
compiled core there; `make test` also runs `tests/core` as pure Python (TRIBUNAL_PURE=1). This module
checks the switch itself, and replays one log of every fold's records through both, byte for byte.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from streams import compiled
from streams.clients import envelope
from streams.core import dispatch, groups, pools, shards
from streams.core.dispatch.fold import job_uuid
from streams.lines import export_row
from tests.core.pools.builders import seed_policy
from tests.helpers import tribunal

COMPILER = shutil.which("cc") is not None and Path(sysconfig.get_paths()["include"], "Python.h").exists()


def env(pure: bool) -> dict[str, str]:
    return {**os.environ, "TRIBUNAL_PURE": "1" if pure else "0"}


def test_the_core_runs_compiled_where_a_compiler_is_and_says_so() -> None:
    from streams.core.pools import decider

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    extension = decider.__file__ is not None and decider.__file__.endswith(suffixes)
    forced = os.environ.get("TRIBUNAL_PURE", "") not in ("", "0")
    if COMPILER and not forced:
        assert extension and compiled.running() == "compiled (mypyc)", (decider.__file__, compiled.running())
    else:
        assert not extension and compiled.running().startswith("pure Python"), (decider.__file__, compiled.running())
    version = tribunal("--version", env=env(pure=False)).stdout
    assert version.startswith("tribunal ") and ("compiled (mypyc)" in version) == COMPILER, version
    assert "pure Python (TRIBUNAL_PURE=1)" in tribunal("--version", env=env(pure=True)).stdout


def test_a_source_changed_since_the_build_runs_pure_and_no_extension_is_loaded(tmp_path: Path) -> None:
    core = tmp_path / "core"
    shutil.copytree(compiled.CORE, core, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    before = compiled.digest(core)
    (core / "pools" / "decider.py").write_text((core / "pools" / "decider.py").read_text() + "\n# changed\n")
    assert compiled.digest(core) != before
    assert compiled.verdict(pure=False, stamp=before, current=compiled.digest(core)).startswith(
        "pure Python (streams/core changed")
    assert compiled.verdict(pure=False, stamp=None, current=before).startswith("pure Python (not compiled")
    assert compiled.verdict(pure=True, stamp=before, current=before) == "pure Python (TRIBUNAL_PURE=1)"
    assert compiled.verdict(pure=False, stamp=before, current=before) == "compiled (mypyc)"
    code = ("import streams.core.pools.decider as d, streams.core.dispatch.heap as h; "
            "print(d.__file__, h.__file__)")
    loaded = subprocess.run([sys.executable, "-c", code], env=env(pure=True), capture_output=True,
                                          text=True, check=True).stdout.split()
    assert all(name.endswith(".py") for name in loaded), loaded


def every_fold_log(path: Path, records: int, seed: int = 5) -> int:
    """A replay file with records of every fold: the pool bench's metrics (10 apps, 1% broken), scheduler groups,
    a dispatcher namespace's assigns, finishes, failures, cancels and ticks, and a job set's nodes."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []

    def add(topic: str, key: str | None, value: bytes) -> None:
        rows.append(export_row(topic, 0, len(rows), 1_732_200_000_000 + 10 * len(rows),
                               None if key is None else key.encode(), value))

    for p in range(3):
        add(pools.POLICIES, f"pool-{p}", json.dumps(seed_policy()).encode())
    assigned: list[str] = []
    for _ in range(records):
        kind = rng.random()
        if kind < 0.45:
            value = envelope(rng.choice(["ats", "hadoop", "hdfs"]), rng.randrange(101), pools.PLUGIN_DECIDER)
            add(pools.PLUGIN_DECIDER, f"pool-{rng.randrange(4)}", value if rng.random() > 0.01 else b"{broken")
        elif kind < 0.6:
            event = rng.choice([{"type": "SchedulerRegistered", "scheduler": f"s{rng.randrange(4)}",
                                 "fault_tolerance": 1},
                                {"type": "JobCreated", "job": f"j{rng.randrange(50)}"},
                                {"type": "JobDeleted", "job": f"j{rng.randrange(50)}"}])
            topic = groups.SCHEDULER_EVENTS if event["type"].startswith("Scheduler") else groups.JOB_EVENTS
            add(topic, None, json.dumps({"group": f"g{rng.randrange(3)}", **event}).encode())
        elif kind < 0.85:
            ns, now = "ns", 1_732_200_000_000 + 10 * len(rows)
            if rng.random() < 0.3 or not assigned:
                count = rng.randrange(1, 6)
                for i in range(count):
                    assigned.append(job_uuid(dispatch.DISPATCH_COMMANDS, 0, len(rows), i))
                command: dict[str, Any] = {
                    "type": "JobsAssigned", "worker": f"w{rng.randrange(3)}", "start": now + rng.randrange(-50, 200),
                    "end": now + 300, "jobs": [{"external_id": f"e{i}", "max_retries": rng.randrange(2),
                                                "timeout_ms": rng.randrange(20, 500)} for i in range(count)]}
                command["end"] = max(command["end"], command["start"])
            else:
                kind = rng.choice(["JobFinished", "JobFailed", "JobCancelled", "Tick", "MaxThreadsSet"])
                command = ({"type": "Tick", "now": now} if kind == "Tick" else
                           {"type": kind, "max": rng.randrange(1, 4)} if kind == "MaxThreadsSet" else
                           {"type": kind, "uuid": rng.choice(assigned)})
            add(dispatch.DISPATCH_COMMANDS, ns, json.dumps({"namespace": ns, **command}).encode())
        else:
            node = f"n{rng.randrange(5)}"
            event = rng.choice([{"type": "NodeJoined", "node": node, "address": f"10.0.0.1:{9000 + int(node[1:])}"},
                                {"type": "NodeLost", "node": node},
                                {"type": "TaskCountSet", "tasks": rng.randrange(1, 64)}])
            add(shards.SHARD_EVENTS, "js", json.dumps({"job_set": "js", **event}).encode())
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return len(rows)


def test_pure_and_compiled_replay_every_folds_log_to_the_same_bytes(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    every_fold_log(log, 6_000)
    outputs = {}
    for pure in (True, False):
        out = tmp_path / f"{'pure' if pure else 'compiled'}.jsonl"
        tribunal("audit", "replay", "-i", str(log), "-o", str(out), env=env(pure))
        outputs[pure] = out.read_bytes()
    rows = [json.loads(line) for line in outputs[True].splitlines()]
    made = {row["topic"] for row in rows}
    assert {pools.SCALING_DECISIONS, pools.POOL_INSTANCES, groups.REJECTION_LIMITS, dispatch.JOB_STARTS,
            dispatch.JOB_OUTCOMES, shards.SHARD_PLANS, "plugin_decider.dlq", "dispatch-commands.dlq"} <= made, made
    assert outputs[True] == outputs[False]
