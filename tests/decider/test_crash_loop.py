"""The actuator under a crash loop, live (issue 46): a real worker, Kafka, ZooKeeper, and copies that keep dying.

A copy that dies young again and again, or a target whose `apply` keeps raising, is a difference the actuator
cannot put right: after `--report-after` the decider is told what runs (`InstancesObserved`), once, and its
later decisions may ask for the app again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

from schemas.decisions import Actuation
from streams.clients import read_log
from streams.decider import DeciderClient
from streams.decider.actuator import Actuator
from streams.decider.targets import Change
from streams.decider.targets.process import ProcessTarget
from streams.infra.topology import free_ports
from tests.decider.conftest import Loop, metric_values, policy, scrape
from tests.decider.test_actuate import copies, counts, desired, write
from tests.helpers import Service, eventually, until


def observations(loop: Loop, pool: str) -> list[dict[str, int]]:
    """What `InstancesObserved` records on `cluster-events` told the pool's decider, in order."""
    records = asyncio.run(read_log(loop.settings.kafka_bootstrap, [loop.settings.topic("cluster-events")]))
    values = [json.loads(r.value) for r in records if r.key == pool.encode()]
    return [v["instances"] for v in values if v.get("type") == "InstancesObserved"]


def test_a_copy_that_exits_at_once_backs_off_is_reported_once_and_runs_again_when_decided_after_a_fix(
        loop: Loop, tmp_path: Path) -> None:
    pool, state, broken = "crash", tmp_path / "copies", tmp_path / "broken"
    broken.touch()  # batch's release is bad: its copies exit at once, status 3
    command = f"sh -c 'test \"$TRIBUNAL_APP\" = batch -a -e {broken} && exit 3; exec sleep 600'"
    [port] = free_ports(1)
    actuator = Service(loop.cli_env(), tmp_path / "actuate.log", "pools", "actuate", "--pool", pool, "--target",
                       "process",
                       "--command", command, "--state-dir", str(state), "--interval", "0.5", "--report-after", "3",
                       "--grace", "1", "--no-election", "--metrics-port", str(port))
    actuator.start()
    try:
        until(lambda: "actuate" in actuator.log() or actuator.log(), "the actuator's first words")
        write(loop, pool, lambda c: c.apply_policy(policy()))  # web 1, batch 1
        until(lambda: observations(loop, pool), lambda: f"batch reported:\n{actuator.log()[-3000:]}", timeout=60)
        until(lambda: desired(loop, pool) == {"web": 1}, "the decider took the report in: batch has nothing")
        assert observations(loop, pool) == [{"batch": 0}]
        started = actuator.log().count(f"started copy 0 of {pool}/batch")
        assert 2 <= started <= 6, actuator.log()[-3000:]  # backed off: not twice a second
        page = scrape(port)
        assert metric_values(page, "tribunal_actuator_reported_total") == {(("pool", pool),): 1.0}
        assert metric_values(page, "tribunal_actuator_restarts_total")[(("app", "batch"), ("pool", pool))] >= 1
        assert counts(state, pool) == {"web": 1}

        broken.unlink()  # the fixed release; batch's load asks for instances again
        write(loop, pool, lambda c: c.report("batch", 90))
        until(lambda: desired(loop, pool).get("batch", 0) > 0, "the decider gives batch instances again")
        want = desired(loop, pool)
        until(lambda: counts(state, pool) == want, lambda: f"{want}: {counts(state, pool)}")
        assert observations(loop, pool) == [{"batch": 0}]  # nothing more to report: it runs as decided
        assert "put back" not in actuator.log().split("reporting to the decider")[1].split("started copy")[0]
    finally:
        actuator.stop()
        for pids in copies(state, pool).values():
            for pid in pids.values():
                os.killpg(pid, signal.SIGKILL)
    assert "Traceback" not in actuator.log(), actuator.log()[-3000:]
    records = asyncio.run(read_log(loop.settings.kafka_bootstrap, [loop.settings.topic("actuations")]))
    passes = [Actuation.model_validate_json(r.value) for r in records if r.key == pool.encode()]
    assert [p.reported for p in passes if p.reported] == [{"batch": 0}]
    assert any(p.failed.get("batch", "").startswith("crash loop: copy 0 exited with status 3") for p in passes)


class Raising:
    """A target of the user's whose `apply` keeps raising (a cloud API down); it sees nothing running."""

    name = "raising"

    def __init__(self) -> None:
        self.calls = 0

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return dict.fromkeys(apps, 0)

    async def apply(self, change: Change) -> None:
        self.calls += 1
        raise ConnectionError("the cloud API is down")

    async def close(self) -> None:
        return None


def test_a_copy_that_dies_after_two_seconds_and_a_target_that_keeps_raising_are_reported_to_the_decider(
        loop: Loop, tmp_path: Path) -> None:
    state = tmp_path / "copies"
    dying = ProcessTarget(f"{sys.executable} -c 'import time, sys; time.sleep(2); sys.exit(1)'", state, grace=0.5,
                          start_seconds=5.0)
    raising = Raising()
    acts = {"late": Actuator(loop.settings, "late", dying, interval=0.5, report_after=3.0, election=False),
            "raise": Actuator(loop.settings, "raise", raising, interval=0.5, report_after=3.0, election=False)}

    async def scenario() -> None:
        runs = []
        for act in acts.values():
            ready = asyncio.Event()
            runs.append(asyncio.create_task(act.run(ready)))
            await asyncio.wait_for(ready.wait(), 60)
        try:
            for pool in acts:
                async with DeciderClient(loop.settings, pool) as client:
                    await client.apply_policy(policy(web=1, batch=1))
            for pool, act in acts.items():  # the report taken in: the decider's instances are what runs
                want = {"web": 0, "batch": 0}
                await eventually(lambda a=act, w=want: dict(a.client.desired().instances) == w,  # type: ignore[misc]
                                 f"{pool}: the decider told that nothing runs", timeout=90)
        finally:
            for act in acts.values():
                act.stop()
            await asyncio.gather(*runs)
            await dying.stop_all("late")

    asyncio.run(scenario())
    for pool in acts:  # each app once (the two in one record, or in two when their copies died apart)
        told = observations(loop, pool)
        assert sorted(app for seen in told for app in seen) == ["batch", "web"], (pool, told)
        assert {app: n for seen in told for app, n in seen.items()} == {"web": 0, "batch": 0}, (pool, told)
    late = acts["late"].metrics.registry
    assert late.get_sample_value("tribunal_actuator_restarts_total", {"pool": "late", "app": "web"}) >= 1
    assert raising.calls >= 2
    assert acts["raise"].metrics.registry.get_sample_value("tribunal_actuator_reported_total", {"pool": "raise"}) == 2
