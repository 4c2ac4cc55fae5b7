"""One process started for somebody else: started in a session of its own, found again by pid and start time,
stopped with its process group (SIGTERM, then SIGKILL after a grace)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Proc:
    pid: int
    started: int  # the process's start time in clock ticks since boot (/proc/<pid>/stat, field 22)
    child: subprocess.Popen[bytes] | None = None  # None for one adopted, or started by a guardian
    born: float = float("-inf")  # time.monotonic() at its start; one adopted counts as long running
    code: int | None = None  # its exit status, once known (a guardian reports it)
    ticket: int = 0  # the guardian's number for it (a run is known by it, never by a pid that may come round)

    def alive(self) -> bool:
        if self.child is not None:
            # ours: until reaped its pid is no one else's, and `poll` alone says whether it has exited (a look at
            # /proc after `poll` could see it dead while its exit status was never collected)
            return self.child.poll() is None
        if self.code is not None:
            return False
        return start_time(self.pid) == self.started

    def exit_status(self) -> str:
        code = self.code if self.child is None else self.child.returncode
        if code is None:
            return "exited"
        return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill(part: str, **values: object) -> str:
    """A command argument with its placeholders (`{app}`, `{task}`, ...) filled in from `values`; any other brace is
    left as written (`-o jsonpath={.spec.replicas}`)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), part)


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), or None if it is not running (or is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def spawn(argv: Sequence[str], env: Mapping[str, str], output: Path,
          preexec: Callable[[], None] | None = None) -> Proc:
    """Start `argv` in a session of its own (its process group is its pid), its output appended to `output`."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as out:
        child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env=dict(env), start_new_session=True, preexec_fn=preexec)
    started = start_time(child.pid)
    return Proc(child.pid, started if started is not None else -1, child, time.monotonic())


def save(proc: Proc, path: Path) -> None:
    """A pid file: pid and start time, what `load` needs to find the process again (and no other)."""
    path.write_text(json.dumps({"pid": proc.pid, "started": proc.started}))


def load(path: Path) -> Proc | None:
    try:
        saved = json.loads(path.read_text())
        return Proc(int(saved["pid"]), int(saved["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def signal_group(proc: Proc, sig: signal.Signals) -> None:
    """Signal the process's group (it leads its own session: what it started in it goes too)."""
    ours = proc.child is not None and proc.child.returncode is None  # not reaped: its pid is not anyone else's
    if not ours and start_time(proc.pid) != proc.started:
        return  # gone, or its pid is another process's now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def stop(proc: Proc, grace: float) -> None:
    """SIGTERM to the group now, SIGKILL after `grace` seconds; return once the process is gone."""
    loop = asyncio.get_running_loop()
    signal_group(proc, signal.SIGTERM)
    deadline = loop.time() + grace
    while proc.alive() and loop.time() < deadline:
        await asyncio.sleep(0.02)
    if proc.alive():
        signal_group(proc, signal.SIGKILL)
        deadline = loop.time() + 5.0  # SIGKILL takes effect soon, not at once
        while proc.alive() and loop.time() < deadline:
            await asyncio.sleep(0.01)
    if proc.child is not None:
        await asyncio.to_thread(proc.child.wait)
