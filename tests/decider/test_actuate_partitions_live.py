"""Two actuators of one pool and a real partition (issue 48): the elected one in a network namespace of its own,
its link to ZooKeeper and Kafka cut (`tests.netns`) while decisions keep changing.

The bound it proves: a partitioned elected actuator stops applying within two thirds of its session timeout of
its last answer from ZooKeeper (kazoo suspends the session then), before the server can expire that session and
elect the other; healed, it does not apply what it decided before. Judged from the target's own log of calls,
each with its time and the actuator that made it (`exec` target: the command appends a line per call).

Before the fix the cut-off actuator, its session only suspended, kept its leadership: it saw the other's changes
as drift and put its stale counts back, both applying to one target at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.decider import DeciderClient
from streams.settings import Settings
from tests.conftest import Stack, env_of
from tests.decider.conftest import Loop, policy
from tests.helpers import Service, Worker, tribunal, until, wait_until_ready
from tests.netns import Network

SESSION = 4.0


@pytest.fixture
def loop(net_stack: Stack, unique: str, tmp_path: Path) -> Iterator[Loop]:
    env = env_of(net_stack.bootstrap, unique, tmp_path)
    tribunal("topics", "create", env=env)
    worker = Worker(env, tmp_path / "worker.log")
    worker.start()
    try:
        wait_until_ready(worker, 1)
        yield Loop(env, Settings(kafka_bootstrap=net_stack.bootstrap, topic_prefix=f"{unique}.", app_id=unique),
                   worker, net_stack.zookeeper, f"/{unique}")
    finally:
        worker.stop()


def calls_of(path: Path) -> list[tuple[float, int, str, int]]:
    """The target's log: (when, the actuator's pid, app, instances) per call."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        when, pid, app, n = line.split()[:4]
        out.append((float(when), int(pid), app, int(n)))
    return out


def test_a_cut_off_elected_actuator_stops_applying_before_another_is_elected_and_never_applies_beside_it(
        loop: Loop, network: Network, tmp_path: Path) -> None:
    pool, calls, state = "cut", tmp_path / "calls.log", tmp_path / "state"
    state.mkdir()
    command = (f"sh -c 'echo \"$(date +%s.%N) $PPID {{app}} {{instances}}\" >> {calls}; "
               f"echo {{instances}} > {state}/{{app}}'")
    observe = f"sh -c 'cat {state}/{{app}} 2>/dev/null || echo 0'"
    space = network.namespace()

    def actuator(name: str, wrap: list[str]) -> Service:
        return Service(loop.cli_env(), tmp_path / f"{name}.log", "pools", "actuate", "--pool", pool, "--target", "exec",
                       "--command", command, "--observe-command", observe, "--interval", "0.2",
                       "--root", loop.root, "--session-timeout", str(SESSION), wrap=wrap)

    async def write(load: int | None) -> None:
        async with DeciderClient(loop.settings, pool) as client:
            await (client.apply_policy(policy()) if load is None else client.report("web", load))

    cut_off, other = actuator("a", space.wrap([])), actuator("b", [])
    flipping = threading.Event()

    def flip() -> None:  # web between 1 and 5, a decision every 0.7 s
        high = True
        while not flipping.wait(0.7):
            asyncio.run(write(90 if high else 10))
            high = not high

    flipper = threading.Thread(target=flip, daemon=True)
    cut_off.start()
    try:
        until(lambda: "elected" in cut_off.log(), lambda: f"a elected:\n{cut_off.log()[-2000:]}", 60)
        other.start()
        asyncio.run(write(None))
        flipper.start()
        assert cut_off.proc is not None
        until(lambda: sum(1 for c in calls_of(calls) if c[1] == cut_off.proc.pid) >= 3,  # type: ignore[union-attr]
              lambda: f"a applying: {calls_of(calls)}\n{cut_off.log()[-2000:]}", 60)
        space.cut()
        cut = time.time()
        until(lambda: "elected" in other.log(), lambda: f"b elected:\n{other.log()[-2000:]}", 30)
        time.sleep(4)  # b applies; a, cut off, sees b's counts in the target
        space.heal()
        healed = time.time()
        time.sleep(2 * SESSION)  # a back: it must not apply what it decided before, nor anything while b leads
    finally:
        flipping.set()
        if flipper.is_alive():
            flipper.join()
        for service in (cut_off, other):
            service.stop()
        space.heal()
    assert cut_off.proc is not None and other.proc is not None
    a_calls = [c for c in calls_of(calls) if c[1] == cut_off.proc.pid]
    b_calls = [c for c in calls_of(calls) if c[1] == other.proc.pid]
    assert a_calls and b_calls, calls_of(calls)
    a_last, b_first = a_calls[-1][0], b_calls[0][0]
    print(f"a's last call {a_last - cut:+.2f} s from the cut, b's first {b_first - cut:+.2f} s, healed at "
          f"{healed - cut:+.2f} s; {len(a_calls)} calls by a, {len(b_calls)} by b")
    assert a_last < b_first, (a_calls[-3:], b_calls[:3])  # never two actuators at once
    assert a_last - cut <= SESSION, a_last - cut  # stopped before its session could expire on the server
    assert not [c for c in a_calls if c[0] > healed], a_calls[-3:]  # healed, a applies nothing of before
    assert "ZooKeeper connection suspended: not actuating pool cut" in cut_off.log(), cut_off.log()[-3000:]
