"""The actuator's reconcile pass on its own (no broker): the desired state is given as `pool-instances` records
are, the target is a recording one, so each rule of the loop can be seen to hold."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping

import pytest

from schemas.decisions import Actuation
from streams.decider.actuator import BACKOFF_FIRST, Actuator
from streams.decider.targets import ActuationFailed, Change
from streams.settings import Settings


class Recording:
    """A target that runs what it is told, but for the apps in `failing`, and records each change."""

    name = "recording"

    def __init__(self) -> None:
        self.running: dict[str, int] = {}
        self.changes: list[Change] = []
        self.failing: set[str] = set()

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return {app: self.running.get(app, 0) for app in apps}

    async def apply(self, change: Change) -> None:
        self.changes.append(change)
        self.running.update({a: n for a, n in change.instances.items() if a not in self.failing})
        if failed := self.failing & change.instances.keys():
            raise ActuationFailed("refused", failed)

    async def close(self) -> None:
        return None


class Journal:
    """Where the passes' `Actuation` records go instead of the `actuations` topic."""

    def __init__(self) -> None:
        self.written: list[Actuation] = []

    async def __call__(self, record: Actuation) -> None:
        self.written.append(record)


def actuator(**options: object) -> tuple[Actuator, Recording, list[Actuation]]:
    target, journal = Recording(), Journal()
    act = Actuator(Settings(), "p", target, election=False, journal=journal, **options)  # type: ignore[arg-type]
    return act, target, journal.written


def decide(actuator: Actuator, seq: int, **instances: int) -> None:
    actuator.client.learn({"type": "PoolInstances", "pool": "p", "app": app, "instances": n, "seq": seq}
                          for app, n in instances.items())


def counted(actuator: Actuator, name: str) -> float:
    value = actuator.metrics.registry.get_sample_value(name, {"pool": "p", "target": "recording"})
    return 0.0 if value is None else value


def test_nothing_is_applied_before_a_decision_and_only_the_difference_after_one() -> None:
    act, target, written = actuator()
    assert asyncio.run(act.reconcile()) == act.interval and target.changes == []
    decide(act, 1, web=2, batch=1)
    asyncio.run(act.reconcile())
    assert target.changes == [Change("p", 1, {"web": 2, "batch": 1}, {"web": 2, "batch": 1})]
    decide(act, 2, web=3)
    asyncio.run(act.reconcile())
    assert target.changes[-1].instances == {"web": 3} and target.changes[-1].seq == 2
    asyncio.run(act.reconcile())
    assert len(target.changes) == 2 and act.applied_seq == 2 and counted(act, "tribunal_actuator_applied_total") == 3
    assert [(w.seq, w.observed, w.applied, w.running) for w in written] == [
        (1, {"web": 0, "batch": 0}, {"web": 2, "batch": 1}, {"web": 2, "batch": 1}),
        (2, {"web": 2, "batch": 1}, {"web": 3}, {"web": 3, "batch": 1})]  # a pass that did nothing: no record


def test_a_failing_app_is_retried_with_backoff_as_the_newest_desired_state_never_an_older_one() -> None:
    act, target, written = actuator()
    target.failing = {"web"}
    decide(act, 1, web=2, batch=1)
    waits = [asyncio.run(act.reconcile())]
    assert target.running == {"batch": 1}  # the other app of the change is set
    decide(act, 2, web=5)
    waits += [asyncio.run(act.reconcile()), asyncio.run(act.reconcile())]
    assert waits == [BACKOFF_FIRST, 2 * BACKOFF_FIRST, 4 * BACKOFF_FIRST]
    assert [(c.seq, dict(c.instances)) for c in target.changes] == [(1, {"web": 2, "batch": 1}), (2, {"web": 5}),
                                                                    (2, {"web": 5})]
    target.failing.clear()
    assert asyncio.run(act.reconcile()) == act.interval and target.running == {"web": 5, "batch": 1}
    assert act.failures == 0 and counted(act, "tribunal_actuator_failed_total") == 3
    first = written[0]
    assert (first.applied, first.failed, first.running) == ({"batch": 1}, {"web": "refused"}, {"web": 0, "batch": 1})


def test_what_runs_other_than_applied_is_drift_put_back(caplog: pytest.LogCaptureFixture) -> None:
    act, target, written = actuator()
    decide(act, 1, web=3)
    asyncio.run(act.reconcile())
    target.running["web"] = 2  # a copy crashed
    with caplog.at_level(logging.WARNING):
        asyncio.run(act.reconcile())
    assert target.running == {"web": 3} and "p/web runs 2, 3 applied: put back" in caplog.text
    assert act.metrics.registry.get_sample_value("tribunal_actuator_drift_total", {"pool": "p"}) == 1
    assert written[-1].drift == {"web": 2} and written[-1].running == {"web": 3}


def test_a_dry_run_applies_nothing_and_says_what_it_would(caplog: pytest.LogCaptureFixture) -> None:
    act, target, written = actuator(dry_run=True)
    decide(act, 4, web=3, batch=0)
    with caplog.at_level(logging.INFO):
        asyncio.run(act.reconcile())
        asyncio.run(act.reconcile())
    assert target.changes == [] and caplog.text.count("dry run: would set web=3 (decision 4)") == 1
    [written] = written
    assert written.dry_run and written.applied == {"web": 3} and written.running == {"web": 0, "batch": 0}


def test_a_standby_waits_for_the_next_decision_rather_than_spin_on_the_last_one() -> None:
    act, target, written = actuator(interval=30.0)

    async def scenario() -> bool:
        looping = asyncio.create_task(act._reconcile_loop())
        decide(act, 1, web=2)  # a decision a standby hears: it sets `changed`
        await asyncio.sleep(0.2)
        woken = act.client.changed.is_set()  # still set: the loop would wake at once, and again, forever
        act.stop()
        act.client.changed.set()
        await looping
        return woken

    assert asyncio.run(scenario()) is False and target.changes == [] and written == []  # nor does it apply
