"""`tribunal pools actuate` live: a real worker, Kafka, ZooKeeper, and real processes as the target's copies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from schemas.decisions import Actuation
from streams.clients import read_log
from streams.decider import DeciderClient
from streams.infra.topology import free_ports
from streams.processes.proc import start_time
from tests.decider.conftest import Loop, metric_values, policy, scrape
from tests.helpers import Service, eventually, tribunal, until


def copies(state: Path, pool: str) -> dict[str, dict[int, int]]:
    """app -> index -> pid of the copies running, from the target's pid files."""
    found: dict[str, dict[int, int]] = {}
    for pidfile in sorted(state.glob(f"{pool}/*/*.pid")):
        try:
            saved = json.loads(pidfile.read_text())
        except (OSError, ValueError):
            continue
        if start_time(saved["pid"]) == saved["started"]:
            found.setdefault(pidfile.parent.name, {})[int(pidfile.stem)] = saved["pid"]
    return found


def counts(state: Path, pool: str) -> dict[str, int]:
    return {app: len(c) for app, c in copies(state, pool).items() if c}


def write(loop: Loop, pool: str, act: Callable[[DeciderClient], Coroutine[Any, Any, Any]]) -> None:
    async def run() -> None:
        async with DeciderClient(loop.settings, pool) as client:
            await act(client)

    asyncio.run(run())


def desired(loop: Loop, pool: str) -> dict[str, int]:
    """The pool's desired instances as a client starting now reads them (pool-instances)."""
    async def read() -> dict[str, int]:
        async with DeciderClient(loop.settings, pool, group_id=None) as client:
            ready = asyncio.Event()
            task = asyncio.create_task(client.run(ready))
            await asyncio.wait_for(ready.wait(), 60)
            task.cancel()
            return {app: n for app, n in client.desired().instances.items() if n}

    return asyncio.run(read())


def test_the_process_target_follows_decisions_puts_back_a_killed_copy_and_one_actuator_of_two_applies(
        loop: Loop, tmp_path: Path) -> None:
    pool, state = "proc", tmp_path / "copies"
    ports = free_ports(2)

    def actuator(name: str, port: int) -> Service:
        return Service(loop.cli_env(), tmp_path / f"{name}.log", "pools", "actuate", "--pool", pool, "--target",
                       "process",
                       "--command", "sleep 600", "--state-dir", str(state), "--interval", "0.2", "--grace", "2",
                       "--root", loop.root, "--metrics-port", str(port))

    first, second = actuator("a", ports[0]), actuator("b", ports[1])
    first.start()
    until(lambda: "elected" in first.log(), lambda: f"the first actuator elected:\n{first.log()[-2000:]}")
    second.start()
    try:
        write(loop, pool, lambda c: c.apply_policy(policy()))
        until(lambda: counts(state, pool) == {"web": 1, "batch": 1}, lambda: f"a copy each: {counts(state, pool)}")
        write(loop, pool, lambda c: c.report("web", 90))  # load spike: web 1 -> 5
        until(lambda: counts(state, pool) == {"web": 5, "batch": 1}, lambda: f"5 web: {counts(state, pool)}")

        victim = copies(state, pool)["web"][2]
        os.kill(victim, signal.SIGKILL)  # a crashed copy: seen, started again

        def replaced() -> bool:  # one read of the pid files: the victim may die between two
            now = copies(state, pool)
            return {app: len(c) for app, c in now.items() if c} == {"web": 5, "batch": 1} and now["web"][2] != victim

        until(replaced, lambda: f"copy 2 of web started again: {copies(state, pool)}")
        drift = metric_values(scrape(ports[0]), "tribunal_actuator_drift_total")
        assert drift == {(("pool", pool),): 1.0}, drift

        kept = copies(state, pool)["web"]
        write(loop, pool, lambda c: c.report("web", 10))  # load drop: web gives instances up
        first.kill()  # the elected actuator SIGKILLed in the middle of the change: the other takes over
        until(lambda: "elected" in second.log(), lambda: f"the second actuator elected:\n{second.log()[-2000:]}")
        want = desired(loop, pool)
        assert want["web"] < 5, want
        until(lambda: counts(state, pool) == want, lambda: f"{want}: {counts(state, pool)}")
        survivors = copies(state, pool)["web"]
        assert all(kept[i] == pid for i, pid in survivors.items()), (kept, survivors)  # adopted, not restarted

        page = scrape(ports[1])
        assert metric_values(page, "tribunal_actuator_leading") == {(("pool", pool),): 1.0}
        applied = metric_values(page, "tribunal_actuator_applied_total")
        assert applied[(("pool", pool), ("target", "process"))] >= 1
        assert metric_values(page, "tribunal_actuator_lag_seconds") == {(("pool", pool),): 0.0}
    finally:
        for service in (first, second):
            service.stop()
        for pids in copies(state, pool).values():
            for pid in pids.values():
                os.killpg(pid, signal.SIGKILL)
    assert second.log().count("elected") == 1 and "Traceback" not in second.log(), second.log()[-3000:]

    records = asyncio.run(read_log(loop.settings.kafka_bootstrap, [loop.settings.topic("actuations")]))
    passes = [Actuation.model_validate_json(r.value) for r in records if r.key == pool.encode()]
    assert [p.drift for p in passes if p.drift] == [{"web": 4}]  # the killed copy, found and put back
    assert {p.actuator for p in passes} == {p.actuator for p in passes if p.applied} and len({p.actuator for p in
                                                                                             passes}) == 2
    page = tmp_path / "report.html"
    tribunal("audit", "report", "--pool", pool, "-o", str(page), env=loop.env)
    assert "The loop: load, decided instances, and what runs" in page.read_text()


def test_a_change_the_exec_target_keeps_failing_is_retried_then_reported_to_the_decider(loop: Loop,
                                                                                       tmp_path: Path) -> None:
    from streams.decider.actuator import Actuator
    from streams.decider.targets.command import CommandTarget

    pool, calls, refuse = "exec", tmp_path / "calls", tmp_path / "refuse"
    script = (f"import os, sys; open({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n'); "
              f"sys.exit(os.path.exists({str(refuse)!r}) and sys.argv[1] == 'web')")
    target = CommandTarget(f"{sys.executable} -c \"{script}\" {{app}} {{instances}} {{seq}}", timeout=10)
    act = Actuator(loop.settings, pool, target, interval=0.2, report_after=1.0, election=False)

    def ran() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    async def scenario() -> None:
        ready = asyncio.Event()
        running = asyncio.create_task(act.run(ready))
        await asyncio.wait_for(ready.wait(), 60)
        async with DeciderClient(loop.settings, pool) as client:
            await client.apply_policy(policy())
            await eventually(lambda: sorted(ran()) == ["batch 1 1", "web 1 1"], "the policy's instances applied")
            refuse.touch()
            await client.report("web", 90)  # web 1 -> 5, which the target refuses
            await eventually(lambda: act.client.desired().seq == 3, "the decider told what runs")
            assert act.client.desired().instances == {"web": 1, "batch": 1}  # it believes what runs now
            assert ran().count("web 5 2") >= 2  # retried before it was reported
            refuse.unlink()
            await client.report("web", 90)
            await eventually(lambda: ran()[-1] == "web 5 4", "the next decision applied")
        act.stop()
        await running

    asyncio.run(scenario())
    registry = act.metrics.registry
    assert registry.get_sample_value("tribunal_actuator_reported_total", {"pool": pool}) == 1
    assert registry.get_sample_value("tribunal_actuator_failed_total", {"pool": pool, "target": "exec"}) >= 2
