"""The `process` target: N copies of a command per app on this machine, the loop made runnable.

Copy `i` of an app runs the command (its `{pool}`, `{app}` and `{index}` filled in, and `TRIBUNAL_POOL`,
`TRIBUNAL_APP`, `TRIBUNAL_INDEX` in its environment) in a session of its own, its output appended to
`<state-dir>/<pool>/<app>/<i>.log`, its pid and start time (from `/proc`, so that a reused pid is not taken
for it) in `<i>.pid`. The copies outlive the actuator: one that restarts, even after a SIGKILL, adopts the
copies its pid files name that still run, and applies the desired state to them as to its own. A surplus copy
is stopped with SIGTERM, and SIGKILL after `grace` seconds (`streams.processes` starts and stops them). Linux
only (`/proc`).

A copy that died is started again, as the kubelet restarts a container: at once after a long run or a first
quick death (within `start_seconds` of its start: an accident, say a kill), and after a back-off from the
second quick death in a row on (0.5 s, doubling to `max_backoff`, 5 min), forgotten once a copy has run
`start_seconds`. While a copy is in that crash loop (waiting to start again, or started again and not yet run
`start_seconds`) it is not counted as running, and `apply` fails for its app: the app is not put right, and
the actuator reports what does run once the difference has lasted `--report-after`. A copy that is no longer
wanted takes its history with it, so a later decision that asks for it again has it started at once. The
history lives in the actuator's memory: a restarted actuator starts each count again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.decider.targets import ActuationFailed, Change, backoff
from streams.processes.proc import Proc, fill, load, save, spawn, stop

log = logging.getLogger(__name__)

FIRST_BACKOFF = 0.5  # seconds before restarting a copy that died young twice in a row; doubled at each next


@dataclass
class Crashes:
    """One copy's quick deaths in a row (what the kubelet keeps per container for CrashLoopBackOff)."""

    count: int = 0
    not_before: float = 0.0  # time.monotonic(): no start before this
    backoff: float = 0.0  # seconds from the last death to `not_before`
    last: str = ""  # the last death, as a user reads it


class ProcessTarget:
    name = "process"

    def __init__(self, command: str, state_dir: Path, grace: float = 10.0, start_seconds: float = 10.0,
                 max_backoff: float = 300.0) -> None:
        self.command, self.state_dir, self.grace = command, state_dir, grace
        self.start_seconds, self.max_backoff = start_seconds, max_backoff
        self.copies: dict[tuple[str, str], dict[int, Proc]] = {}  # (pool, app) -> index -> copy
        self.crashes: dict[tuple[str, str], dict[int, Crashes]] = {}  # (pool, app) -> index -> its quick deaths
        self.stopping: set[asyncio.Task[None]] = set()
        self.metrics: Any = None  # the actuator's `ActuatorMetrics`, once it has `instrument`ed this target

    def instrument(self, metrics: Any) -> None:
        """Count restarts and show back-offs on the actuator's `/metrics`."""
        self.metrics = metrics

    # -- what runs -------------------------------------------------------------------------------
    def _dir(self, pool: str, app: str) -> Path:
        return self.state_dir / pool / app

    def _running(self, pool: str, app: str) -> dict[int, Proc]:
        """The app's live copies, adopting those an earlier actuator's pid files name, forgetting the dead."""
        copies = self.copies.get((pool, app))
        if copies is None:
            copies = {}
            for pidfile in sorted(self._dir(pool, app).glob("*.pid")):
                adopted = load(pidfile)
                if adopted is not None and pidfile.stem.isdigit():
                    copies[int(pidfile.stem)] = adopted
            self.copies[(pool, app)] = copies
        now = time.monotonic()
        crashes = self.crashes.setdefault((pool, app), {})
        for index, copy in sorted(copies.items()):
            if copy.alive():
                if index in crashes and now - copy.born >= self.start_seconds:
                    if crashes[index].count >= 2:
                        log.info("copy %d of %s/%s has run %.0f s since its restart: no longer crashing", index,
                                 pool, app, now - copy.born)
                    del crashes[index]
                    self._show_backoff(pool, app)
                continue
            del copies[index]
            (self._dir(pool, app) / f"{index}.pid").unlink(missing_ok=True)
            self._died(pool, app, index, copy, crashes.setdefault(index, Crashes()), now)
        return copies

    def _died(self, pool: str, app: str, index: int, copy: Proc, crash: Crashes, now: float) -> None:
        """Note a copy's death: the first quick one is started again at once (an accident), the next ones after
        a back-off that doubles each time; one after a long run starts the count again."""
        ran = now - copy.born
        crash.count = crash.count + 1 if ran < self.start_seconds else 0
        crash.backoff = backoff(crash.count - 1, FIRST_BACKOFF, self.max_backoff) if crash.count >= 2 else 0.0
        crash.not_before = now + crash.backoff
        crash.last = f"{copy.exit_status()} {ran:.1f} s after its start" if ran < self.start_seconds else (
            f"{copy.exit_status()} after {'an earlier actuator started it' if ran == float('inf') else f'{ran:.0f} s'}")
        if crash.count >= 2:
            log.warning("copy %d of %s/%s (pid %d) %s: %d quick deaths in a row, starting it again in %s s", index,
                        pool, app, copy.pid, crash.last, crash.count, f"{crash.backoff:g}")
        else:
            log.warning("copy %d of %s/%s (pid %d) %s: starting it again", index, pool, app, copy.pid, crash.last)
        self._show_backoff(pool, app)

    def _settled(self, pool: str, app: str, copies: Mapping[int, Proc]) -> dict[int, Proc]:
        """The copies that count as running: all but those in a crash loop (died young twice or more in a row)
        that have not yet run `start_seconds` since their restart."""
        crashes = self.crashes.get((pool, app), {})
        return {i: copy for i, copy in copies.items() if i not in crashes or crashes[i].count < 2}

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return {app: len(self._settled(pool, app, self._running(pool, app))) for app in apps}

    # -- changing it -----------------------------------------------------------------------------
    async def apply(self, change: Change) -> None:
        failed: dict[str, str] = {}
        retry: list[float] = []
        now = time.monotonic()
        for app, wanted in sorted(change.instances.items()):
            copies, crashes = self._running(change.pool, app), self.crashes.setdefault((change.pool, app), {})
            try:
                for index in [i for i in range(wanted) if i not in copies][: max(0, wanted - len(copies))]:
                    if index not in crashes or crashes[index].not_before <= now:
                        copies[index] = self._start(change.pool, app, index, again=index in crashes)
            except OSError as e:
                failed[app] = str(e)
            for index in sorted((i for i in copies if i >= wanted), reverse=True)[: max(0, len(copies) - wanted)]:
                self._stop(change.pool, app, index, copies.pop(index))
            for index in [i for i in crashes if i >= wanted]:
                del crashes[index]  # a copy no longer wanted: asked for again, it starts at once
            self._show_backoff(change.pool, app)
            looping = {i: c for i, c in crashes.items() if c.count >= 2}
            if looping and app not in failed:
                failed[app] = _crash_loop(looping)
                retry += [c.not_before - now if i not in copies else copies[i].born + self.start_seconds - now
                          for i, c in looping.items()]
        if failed:
            raise ActuationFailed("; ".join(f"{app}: {why}" for app, why in sorted(failed.items())), failed,
                                  retry_after=max(0.0, min(retry)) if retry else None)

    def _show_backoff(self, pool: str, app: str) -> None:
        if self.metrics is not None:
            crashes = self.crashes.get((pool, app), {})
            self.metrics.backoff.labels(pool, app).set(max((c.backoff for c in crashes.values()), default=0.0))

    def _start(self, pool: str, app: str, index: int, again: bool = False) -> Proc:
        where = self._dir(pool, app)
        argv = [fill(part, pool=pool, app=app, index=index) for part in shlex.split(self.command)]
        env = {**os.environ, "TRIBUNAL_POOL": pool, "TRIBUNAL_APP": app, "TRIBUNAL_INDEX": str(index)}
        copy = spawn(argv, env, where / f"{index}.log")
        save(copy, where / f"{index}.pid")
        log.info("started copy %d of %s/%s%s: pid %d", index, pool, app, " again" if again else "", copy.pid)
        if again and self.metrics is not None:
            self.metrics.restarts.labels(pool, app).inc()
        return copy

    def _stop(self, pool: str, app: str, index: int, copy: Proc) -> None:
        """SIGTERM now, SIGKILL after `grace` (in the background: the loop does not wait for a slow exit)."""
        (self._dir(pool, app) / f"{index}.pid").unlink(missing_ok=True)
        log.info("stopping copy %d of %s/%s: pid %d", index, pool, app, copy.pid)
        task = asyncio.get_running_loop().create_task(stop(copy, self.grace))
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def stop_all(self, pool: str) -> None:
        """Stop every copy of the pool (the demo's end; an actuator that exits leaves them running)."""
        for (p, app), copies in sorted(self.copies.items()):
            if p == pool:
                for index in sorted(copies, reverse=True):
                    self._stop(pool, app, index, copies.pop(index))
        await asyncio.gather(*self.stopping)

    async def close(self) -> None:
        await asyncio.gather(*self.stopping)


def _crash_loop(crashes: Mapping[int, Crashes]) -> str:
    """Why an app is not put right while copies of it die young: the same words until one dies again."""
    said = [f"copy {i} {c.last} ({c.count} in a row, restarts {c.backoff:g} s apart)"
            for i, c in sorted(crashes.items())]
    return "crash loop: " + "; ".join(said)
