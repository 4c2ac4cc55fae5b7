"""The `process` target: N copies of a command per app on this machine, the loop made runnable.

Copy `i` of an app runs the command (its `{pool}`, `{app}` and `{index}` filled in, and `TRIBUNAL_POOL`,
`TRIBUNAL_APP`, `TRIBUNAL_INDEX` in its environment) in a session of its own, its output appended to
`<state-dir>/<pool>/<app>/<i>.log`, its pid and start time (from `/proc`, so that a reused pid is not taken
for it) in `<i>.pid`. The copies outlive the actuator: one that restarts, even after a SIGKILL, adopts the
copies its pid files name that still run, and applies the desired state to them as to its own. A copy that
died is not counted (the actuator starts it again); a surplus copy is stopped with SIGTERM, and SIGKILL after
`grace` seconds. Linux only (`/proc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from streams.decider.targets import ActuationFailed, Change, fill

log = logging.getLogger(__name__)


@dataclass
class Copy:
    pid: int
    started: int  # the process's start time in clock ticks since boot (/proc/<pid>/stat, field 22)
    child: subprocess.Popen[bytes] | None = None  # None for a copy adopted from an earlier actuator

    def alive(self) -> bool:
        if self.child is not None and self.child.poll() is not None:
            return False  # ours, and reaped
        return start_time(self.pid) == self.started


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), or None if it is not running (or is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


class ProcessTarget:
    name = "process"

    def __init__(self, command: str, state_dir: Path, grace: float = 10.0) -> None:
        self.command, self.state_dir, self.grace = command, state_dir, grace
        self.copies: dict[tuple[str, str], dict[int, Copy]] = {}  # (pool, app) -> index -> copy
        self.stopping: set[asyncio.Task[None]] = set()

    # -- what runs -------------------------------------------------------------------------------
    def _dir(self, pool: str, app: str) -> Path:
        return self.state_dir / pool / app

    def _running(self, pool: str, app: str) -> dict[int, Copy]:
        """The app's live copies, adopting those an earlier actuator's pid files name, forgetting the dead."""
        copies = self.copies.get((pool, app))
        if copies is None:
            copies = {}
            for pidfile in sorted(self._dir(pool, app).glob("*.pid")):
                try:
                    saved = json.loads(pidfile.read_text())
                    copies[int(pidfile.stem)] = Copy(int(saved["pid"]), int(saved["started"]))
                except (OSError, ValueError, KeyError, TypeError):
                    continue
            self.copies[(pool, app)] = copies
        for index, copy in sorted(copies.items()):
            if not copy.alive():
                log.warning("copy %d of %s/%s (pid %d) is not running", index, pool, app, copy.pid)
                del copies[index]
                (self._dir(pool, app) / f"{index}.pid").unlink(missing_ok=True)
        return copies

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return {app: len(self._running(pool, app)) for app in apps}

    # -- changing it -----------------------------------------------------------------------------
    async def apply(self, change: Change) -> None:
        failed: dict[str, str] = {}
        for app, wanted in sorted(change.instances.items()):
            copies = self._running(change.pool, app)
            try:
                for index in [i for i in range(wanted) if i not in copies][: max(0, wanted - len(copies))]:
                    copies[index] = self._start(change.pool, app, index)
            except OSError as e:
                failed[app] = str(e)
            for index in sorted((i for i in copies if i >= wanted), reverse=True)[: max(0, len(copies) - wanted)]:
                self._stop(change.pool, app, index, copies.pop(index))
        if failed:
            raise ActuationFailed("; ".join(f"{app}: {why}" for app, why in sorted(failed.items())), failed)

    def _start(self, pool: str, app: str, index: int) -> Copy:
        where = self._dir(pool, app)
        where.mkdir(parents=True, exist_ok=True)
        argv = [fill(part, pool=pool, app=app, index=index) for part in shlex.split(self.command)]
        env = {**os.environ, "TRIBUNAL_POOL": pool, "TRIBUNAL_APP": app, "TRIBUNAL_INDEX": str(index)}
        with open(where / f"{index}.log", "ab") as output:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        started = start_time(child.pid)
        copy = Copy(child.pid, started if started is not None else -1, child)
        (where / f"{index}.pid").write_text(json.dumps({"pid": copy.pid, "started": copy.started}))
        log.info("started copy %d of %s/%s: pid %d", index, pool, app, copy.pid)
        return copy

    def _stop(self, pool: str, app: str, index: int, copy: Copy) -> None:
        """SIGTERM now, SIGKILL after `grace` (in the background: the loop does not wait for a slow exit)."""
        (self._dir(pool, app) / f"{index}.pid").unlink(missing_ok=True)
        log.info("stopping copy %d of %s/%s: pid %d", index, pool, app, copy.pid)
        _signal(copy, signal.SIGTERM)
        task = asyncio.get_running_loop().create_task(self._reap(copy))
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def _reap(self, copy: Copy) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace
        while copy.alive() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if copy.alive():
            _signal(copy, signal.SIGKILL)
            deadline = loop.time() + 5.0  # SIGKILL takes effect soon, not at once
            while copy.alive() and loop.time() < deadline:
                await asyncio.sleep(0.01)
        if copy.child is not None:
            await asyncio.to_thread(copy.child.wait)

    async def stop_all(self, pool: str) -> None:
        """Stop every copy of the pool (the demo's end; an actuator that exits leaves them running)."""
        for (p, app), copies in sorted(self.copies.items()):
            if p == pool:
                for index in sorted(copies, reverse=True):
                    self._stop(pool, app, index, copies.pop(index))
        await asyncio.gather(*self.stopping)

    async def close(self) -> None:
        await asyncio.gather(*self.stopping)


def _signal(copy: Copy, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(copy.pid, sig)  # the copy's session: what it started goes too
