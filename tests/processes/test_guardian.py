"""A node's task processes end with the node, however it ends (issue 47; seed 003's orphans): real processes,
real signals, judged from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from streams.processes.guardian import GUARDIAN, RUN, Guardian, GuardianError, protections, sweep
from tests.helpers import until

ROOT = Path(__file__).resolve().parents[2]
# a script with children of its own, one that leaves its group and session (a double fork), one that ignores TERM
FAMILY = ["sleep 60 & sleep 60 & wait", "(setsid sleep 60 &); sleep 60", "trap '' TERM; sleep 60 & wait"]


def marked(mark: str, run: str | None = None) -> list[int]:
    """The pids of every process whose environment names guardian `mark` (and run `run`)."""
    found = []
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if env.get(GUARDIAN) == mark and run in (None, env.get(RUN)) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def node(mark: str, where: Path) -> tuple[subprocess.Popen[str], dict[str, object]]:
    child = subprocess.Popen([sys.executable, "-m", "tests.processes.guarded", mark, str(where), *FAMILY],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None
    started = json.loads(child.stdout.readline())
    until(lambda: len(marked(mark)) >= 7, lambda: f"the family running: {marked(mark)}", timeout=10)
    return child, started


def test_this_machine_has_the_protections_the_guardian_relies_on() -> None:
    held = protections()
    assert held and "child subreaper" in held[0] and "no child subreaper" not in held[0], held


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_every_process_of_a_nodes_runs_ends_within_a_second_of_the_node_however_it_ends(
        how: signal.Signals, tmp_path: Path) -> None:
    mark = f"test-{uuid.uuid4().hex}"
    child, _ = node(mark, tmp_path)
    family = marked(mark)
    os.kill(child.pid, how)
    killed = time.monotonic()
    until(lambda: not marked(mark), lambda: f"orphans left: {marked(mark)} of {family}", timeout=5, every=0.01)
    assert time.monotonic() - killed < 1.0
    child.wait()


def test_a_guardian_killed_alone_takes_its_runs_own_processes_ends_what_they_left_and_is_started_again(
        tmp_path: Path) -> None:
    mark = f"test-{uuid.uuid4().hex}"

    async def gone(what: str, done: Callable[[], bool]) -> None:
        for _ in range(500):
            if done():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"not within 5 s: {what}")

    async def scenario() -> None:
        guardian = Guardian(mark, "test")
        await guardian.start()
        try:
            assert guardian.process is not None
            first = guardian.process.pid
            runs = [await guardian.run(["sh", "-c", command], dict(os.environ), tmp_path / f"{i}.log", f"run{i}")
                    for i, command in enumerate(FAMILY)]
            await gone("the family running", lambda: len(marked(mark)) >= 7)
            await guardian.lease(time.monotonic() + 3600)
            os.kill(first, signal.SIGKILL)
            for run in runs:
                with pytest.raises(GuardianError):
                    await guardian.wait(run)  # each run failed with its guardian
            await gone("what the runs left ended, and another guardian running",
                       lambda: not marked(mark) and guardian.running and guardian.process.pid != first)
            again = await guardian.run(["sh", "-c", "exit 5"], dict(os.environ), tmp_path / "again.log", "again")
            assert await guardian.wait(again) == 5
        finally:
            await guardian.close()

    asyncio.run(scenario())
    assert not marked(mark)


def test_a_run_stopped_goes_whole_its_escaped_grandchild_too_and_its_status_is_reported(tmp_path: Path) -> None:
    mark = f"test-{uuid.uuid4().hex}"

    async def scenario() -> tuple[int, int, list[int]]:
        guardian = Guardian(mark)
        await guardian.start()
        try:
            done = await guardian.run(["sh", "-c", "exit 3"], dict(os.environ), tmp_path / "done.log", "done")
            stubborn = await guardian.run(["sh", "-c", FAMILY[1] + " & " + FAMILY[2]], dict(os.environ),
                                          tmp_path / "stubborn.log", "stubborn")
            other = await guardian.run(["sleep", "60"], dict(os.environ), tmp_path / "other.log", "other")
            await asyncio.sleep(0.3)
            code = await guardian.wait(done)
            assert len(marked(mark, "stubborn")) >= 4
            stopped = await guardian.stop(stubborn, "stubborn", grace=0.3)
            await asyncio.sleep(0.1)
            assert marked(mark, "stubborn") == []  # its group, its escaped grandchild, its TERM-deaf child
            return code, stopped, [p for p in marked(mark) if p == other.pid]
        finally:
            await guardian.close()

    code, stopped, other = asyncio.run(scenario())
    assert code == 3 and stopped in (-signal.SIGTERM, -signal.SIGKILL, 143, 137), stopped
    assert other  # another run is not touched by the stop
    assert not marked(mark)  # and the close ended it


def test_the_guardian_survives_what_a_caller_or_a_command_gets_wrong_and_a_finished_run_leaves_nothing(
        tmp_path: Path) -> None:
    """A caller that gives up while its run starts, a command the system refuses (a NUL in an argument), a stop
    of a run that ended already: the guardian answers and goes on; a run whose own process exits takes what it
    left in the background with it; and a sweep leaves a live guardian's runs alone."""
    mark = f"test-{uuid.uuid4().hex}"

    async def scenario() -> None:
        guardian = Guardian(mark)
        await guardian.start()
        try:
            env = dict(os.environ)
            starting = asyncio.ensure_future(guardian.run(["sleep", "60"], env, tmp_path / "a.log", "abandoned"))
            await asyncio.sleep(0)  # the request is on its way
            starting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await starting
            with pytest.raises(GuardianError, match="null byte"):
                await guardian.run(["sh", "-c", "exit 0", "a\0b"], env, tmp_path / "b.log", "refused")
            quick = await guardian.run(["sh", "-c", "sleep 60 & exit 4"], env, tmp_path / "c.log", "quick")
            assert await guardian.wait(quick) == 4
            assert await guardian.stop(quick, "quick", grace=1) == 4  # ended already: answered at once
            await asyncio.sleep(0.2)
            assert marked(mark, "quick") == [] and marked(mark, "abandoned") == []
            alive = await guardian.run(["sleep", "60"], env, tmp_path / "d.log", "alive")
            assert sweep(mark) == [] and marked(mark, "alive") == [alive.pid]  # its guardian lives
        finally:
            await guardian.close()

    asyncio.run(scenario())
    assert not marked(mark)


def test_runs_end_when_the_lease_runs_out_unextended_and_not_while_it_is_extended(tmp_path: Path) -> None:
    """What stops a frozen node's runs: the guardian holds the node's lease and SIGKILLs every run, whole, when it
    runs out; a lease extended in time leaves them running."""
    mark = f"test-{uuid.uuid4().hex}"

    async def scenario() -> tuple[float, list[int]]:
        guardian = Guardian(mark, "test")
        await guardian.start()
        try:
            runs = [await guardian.run(["sh", "-c", command], dict(os.environ), tmp_path / f"{i}.log", f"run{i}")
                    for i, command in enumerate(FAMILY)]
            for _ in range(5):  # extended every 0.2 s, a lease of 0.5 s holds
                await guardian.lease(time.monotonic() + 0.5)
                await asyncio.sleep(0.2)
            assert len(marked(mark)) >= 7
            lapsed = time.monotonic() + 0.3
            await guardian.lease(lapsed)
            codes = [await guardian.wait(run) for run in runs]
            late = time.monotonic() - lapsed
            await asyncio.sleep(0.05)
            assert marked(mark) == []  # what the runs spawned went too (the setsid grandchild, the TERM-deaf)
            return late, codes
        finally:
            await guardian.close()

    late, codes = asyncio.run(scenario())
    assert codes == [-signal.SIGKILL] * len(FAMILY), codes
    assert 0 <= late < 1.0, late
