"""How long a SIGKILLed worker takes to decide again after its restart, at 1,000 records/s (issue 14).

A fresh local stack and `tribunal worker` (exactly-once); metric envelopes at --rate for the whole
run; every --every seconds the worker is SIGKILLed and started again at once. Per restart: from
the new process's start to the first decision it makes visible to a read_committed consumer
(a decision whose cause is an input produced after the kill, so one the killed process cannot
have made), and the phases of the new worker's log (Faust's start, partitions assigned, tables
recovered: `RESTART_LOG=/tmp/r` keeps each restart's log as /tmp/r.N; `RESTART_PROFILE=/tmp/p` records its
first 4 s with py-spy, if installed, as /tmp/p.N).
Run: `.venv/bin/python bench/restart.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from e2e import POOLS, collecting, metrics, policies, produce, start_worker, worker_env  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

PHASES = {  # a restart's phases, each ending at the first log line holding its text
    "start": "tribunal ",  # the interpreter up, the modules imported, the settings read
    "assignment": "Executing _on_partitions_assigned",  # Faust's services started, the group joined
    "producers": "Restoring state from changelog topics",  # the transactional producers started, the stores opened
    "recovery": "Restore complete",  # the changelogs read
    "ready": "Worker ready",  # the inputs sought to their committed offsets
}


def phases(log: str, wall_start: float, first: float | None) -> dict[str, float]:
    """Seconds each phase of a restart took, from its log's timestamps (wall clock, milliseconds) and the first
    decision's arrival (`first`): each phase from the end of the one before."""
    ends: dict[str, float] = {}
    for line in log.splitlines():
        for name, text in PHASES.items():
            if name not in ends and text in line and line.startswith("[20"):
                stamp = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
                ends[name] = stamp.timestamp()
    if first is not None:
        ends["first decision"] = first
    took, before = {}, wall_start
    for name, end in ends.items():
        took[name] = end - before
        before = end
    return took


async def run(cluster: Any, rate: float, restarts: int, every: float) -> tuple[list[float], list[dict[str, float]]]:
    bootstrap = cluster.topology.bootstrap
    env, _ = worker_env(bootstrap, "restart", Path(cluster.topology.home))
    env = {**env, "TRIBUNAL_LOG_LEVEL": os.environ["TRIBUNAL_LOG_LEVEL"]}
    prefix = "restart."
    worker = start_worker(env)
    seen: list[tuple[float, bytes]] = []
    phased: list[dict[str, float]] = []
    try:
        await produce(bootstrap, prefix + "policies", policies())
        total = int(rate * (every * (restarts + 1) + 40))
        task = await collecting(bootstrap, prefix + "scaling-decisions", total + POOLS, 900, seen)
        producing = asyncio.ensure_future(produce(bootstrap, prefix + "plugin_decider", metrics(total, 7), rate))
        gaps = []
        for i in range(restarts):
            await asyncio.sleep(every)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            killed = time.time() * 1000
            started = time.monotonic()
            worker = start_worker(env)
            if os.environ.get("RESTART_PROFILE") and shutil.which("py-spy"):  # the new process's first seconds, sampled
                subprocess.Popen(["py-spy", "record", "--nonblocking", "-r", "200", "-d", "4", "-f", "raw", "-p",
                                  str(worker.pid), "-o", f"{os.environ['RESTART_PROFILE']}.{i + 1}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            first = None
            while first is None and time.monotonic() - started < 180:
                await asyncio.sleep(0.05)
                for at, value in seen[-2000:]:
                    if json.loads(value)["cause"]["timestamp"] > killed:
                        first = at
                        break
            wall_start = time.time() - (time.monotonic() - started)
            gap = (first - wall_start) if first is not None else float("inf")
            gaps.append(gap)
            log = Path(env["TRIBUNAL_DATA_DIR"] + ".log").read_bytes()
            if os.environ.get("RESTART_LOG"):  # the new process's log so far, for where its time went
                Path(f"{os.environ['RESTART_LOG']}.{i + 1}").write_bytes(log)
            steps = phases(log.decode(errors="replace"), wall_start, first)
            phased.append(steps)
            print(f"  restart {i + 1}: deciding again {gap:6.2f} s after the new process started ("
                  + ", ".join(f"{name} {took:.2f}" for name, took in steps.items()) + ")", flush=True)
        producing.cancel()
        task.cancel()
        return gaps, phased
    finally:
        worker.terminate()
        worker.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--every", type=float, default=15.0)
    args = parser.parse_args()
    os.environ.setdefault("TRIBUNAL_LOG_LEVEL", "info")
    print(describe())
    with local_stack("restart") as cluster:
        gaps, phased = asyncio.run(run(cluster, args.rate, args.restarts, args.every))
    print(f"restart to deciding again at {args.rate:g} records/s: median {statistics.median(gaps):.2f} s, "
          f"max {max(gaps):.2f} s (n={len(gaps)})")
    names = [name for name in [*PHASES, "first decision"] if all(name in steps for steps in phased)]
    print("phases, median s: " + ", ".join(f"{name} {statistics.median(s[name] for s in phased):.2f}"
                                           for name in names))


if __name__ == "__main__":
    main()
