"""What binding task processes to their node costs and how fast they go with it (issue 47): no broker needed.

1. A node's SIGKILL to its task processes' last one gone: a stand-in node (this script, `--as-node`) starts a
   guardian and runs through it three commands with children and a double fork (seven processes); the node is
   SIGKILLed and /proc is read every millisecond until no process carrying its guardian's mark is left.
2. Runs a second on one node: `true` run through the guardian one after the other (start, wait for its exit),
   beside the same through a bare `asyncio.create_subprocess_exec` (the physical limit here: a fork and an exec)
   and a coroutine run (what a run costs without a process), in the same run.

Run: `.venv/bin/python bench/guardian.py [--kills 10] [--runs 300]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.processes.guardian import GUARDIAN, Guardian  # noqa: E402

FAMILY = ["sleep 60 & sleep 60 & wait", "(setsid sleep 60 &); sleep 60", "trap '' TERM; sleep 60 & wait"]


def marked(mark: str) -> list[int]:
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(GUARDIAN) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


async def as_node(mark: str, where: Path) -> None:
    guardian = Guardian(mark)
    await guardian.start()
    for i, command in enumerate(FAMILY):
        await guardian.run(["sh", "-c", command], dict(os.environ), where / f"{i}.log", f"run{i}")
    print("ready", flush=True)
    await asyncio.sleep(3600)


def kill_to_gone(where: Path) -> float:
    mark = f"bench-{uuid.uuid4().hex}"
    node = subprocess.Popen([sys.executable, __file__, "--as-node", mark, str(where)], stdout=subprocess.PIPE,
                            text=True)
    assert node.stdout is not None and node.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 10
    while len(marked(mark)) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    node.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    while marked(mark):
        time.sleep(0.001)
    gone = time.monotonic() - killed
    node.wait()
    return gone


async def rates(runs: int, where: Path) -> dict[str, float]:
    guardian = Guardian(f"bench-{uuid.uuid4().hex}")
    await guardian.start()
    try:
        began = time.perf_counter()
        for i in range(runs):
            proc = await guardian.run(["true"], dict(os.environ), where / "rate.log", f"r{i}")
            await guardian.wait(proc)
        through = runs / (time.perf_counter() - began)
    finally:
        await guardian.close()
    began = time.perf_counter()
    for _ in range(runs):
        bare = await asyncio.create_subprocess_exec("true", stdin=subprocess.DEVNULL, start_new_session=True)
        await bare.wait()
    direct = runs / (time.perf_counter() - began)
    began = time.perf_counter()
    for _ in range(runs * 100):
        await asyncio.sleep(0)
    coroutine = runs * 100 / (time.perf_counter() - began)
    return {"guardian": through, "bare": direct, "coroutine": coroutine}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--as-node", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_node:
        asyncio.run(as_node(args.as_node[0], Path(args.as_node[1])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        gones = [kill_to_gone(where) for _ in range(args.kills)]
        rated = asyncio.run(rates(args.runs, where))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}")
    print(json.dumps({
        "node SIGKILL -> last task process gone (ms)": {
            "median": round(statistics.median(gones) * 1000, 1), "max": round(max(gones) * 1000, 1),
            "all": [round(g * 1000, 1) for g in gones]},
        "runs/s through the guardian": round(rated["guardian"]),
        "runs/s, bare create_subprocess_exec (peer)": round(rated["bare"]),
        "guardian / bare": round(rated["guardian"] / rated["bare"], 2),
        "coroutine runs/s (no process)": round(rated["coroutine"]),
    }, indent=2))


if __name__ == "__main__":
    main()
