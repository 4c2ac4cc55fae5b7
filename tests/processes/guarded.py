"""A stand-in for a node (run as `python -m tests.processes.guarded MARK DIR CMD...`): starts a guardian, runs
each command through it, prints their pids as one JSON line, and waits to be killed."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from streams.processes.guardian import Guardian


async def main(mark: str, where: Path, commands: list[str]) -> None:
    guardian = Guardian(mark)
    await guardian.start()
    procs = [await guardian.run(["sh", "-c", command], dict(os.environ), where / f"{i}.log", f"run{i}")
             for i, command in enumerate(commands)]
    print(json.dumps({"node": os.getpid(), "guardian": guardian.process.pid if guardian.process else 0,
                      "runs": [p.pid for p in procs]}), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3:]))
