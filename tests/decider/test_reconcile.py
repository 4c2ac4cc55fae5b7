"""The actuator's reconcile pass on its own (no broker): the desired state is given as `pool-instances` records
are, the target is a recording one, so each rule of the loop can be seen to hold."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from pathlib import Path

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


def told(act: Actuator) -> list[dict[str, int]]:
    """Catch what the actuator tells the decider (`InstancesObserved`) instead of writing it to the broker."""
    reports: list[dict[str, int]] = []

    async def observe_all(instances: Mapping[str, int], pool: str | None = None) -> None:
        reports.append(dict(instances))

    act.client.observe_all = observe_all  # type: ignore[assignment,method-assign]
    return reports


class Dying(Recording):
    """A target that starts what it is told without complaint, but whose copies of `dying` never stay up (what an
    exec target over a cluster whose pods crash-loop looks like)."""

    def __init__(self, dying: str) -> None:
        super().__init__()
        self.dying = dying

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return {app: 0 if app == self.dying else self.running.get(app, 0) for app in apps}


def passes(act: Actuator, seconds: float) -> int:
    """Run the actuator's passes as its loop does, at the waits they ask for, for `seconds`; how many ran."""
    async def run() -> int:
        loop, count = asyncio.get_running_loop(), 0
        deadline = loop.time() + seconds
        while loop.time() < deadline:
            await asyncio.sleep(min(await act.reconcile(), deadline - loop.time()))
            count += 1
        return count

    return asyncio.run(run())


def test_an_app_started_again_and_again_that_never_stays_up_is_reported_after_report_after_once() -> None:
    target, journal = Dying("batch"), Journal()
    act = Actuator(Settings(), "p", target, election=False, journal=journal, interval=0.05, report_after=0.5)
    reports = told(act)
    decide(act, 1, web=1, batch=1)
    passes(act, 1.0)
    assert reports == [{"batch": 0}]  # each start succeeded, and still it was never put right
    assert len([c for c in target.changes if "batch" in c.instances]) > 5 and act.reported["batch"].runs == 0
    assert [w.reported for w in journal.written if w.reported] == [{"batch": 0}]
    decide(act, 2, batch=0)  # the decider took the report in: batch is given nothing
    passes(act, 0.2)
    assert act.differing == {} and act.reported == {} and reports == [{"batch": 0}]


def test_a_target_whose_apply_keeps_raising_fails_every_app_of_the_change_and_is_reported_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Recording):
        async def apply(self, change: Change) -> None:
            self.changes.append(change)
            raise RuntimeError("the cloud API is down")

    target, journal = Broken(), Journal()
    act = Actuator(Settings(), "p", target, election=False, journal=journal, interval=0.05, report_after=0.4)
    reports = told(act)
    decide(act, 1, web=2, batch=1)
    with caplog.at_level(logging.WARNING):
        ran = passes(act, 1.2)
    assert reports == [{"web": 0, "batch": 0}] and len(target.changes) >= 2 and ran == len(target.changes)
    assert caplog.text.count("the recording target raised applying decision 1") == 1  # with its traceback, once
    assert caplog.text.count("target failed for ['batch', 'web']") == 1
    assert journal.written[0].failed == {"web": "RuntimeError: the cloud API is down",
                                         "batch": "RuntimeError: the cloud API is down"}
    assert len(journal.written) == 2 and journal.written[1].reported == {"web": 0, "batch": 0}  # once per change
    assert act.metrics.registry.get_sample_value("tribunal_actuator_failing", {"pool": "p", "app": "web"}) == 1


def test_an_app_that_runs_again_before_the_decider_acted_on_its_report_is_reported_again() -> None:
    act, target, written = actuator(interval=0.05, report_after=0.2)
    reports = told(act)
    target.failing = {"web"}
    decide(act, 1, web=2)
    passes(act, 0.5)
    assert reports == [{"web": 0}]
    assert act.metrics.registry.get_sample_value("tribunal_actuator_failing", {"pool": "p", "app": "web"}) == 1
    target.failing.clear()  # a fixed release, before a decision took the report in
    passes(act, 0.2)
    assert reports == [{"web": 0}, {"web": 2}] and target.running == {"web": 2}
    assert act.metrics.registry.get_sample_value("tribunal_actuator_recovered_total", {"pool": "p"}) == 1
    assert act.metrics.registry.get_sample_value("tribunal_actuator_failing", {"pool": "p", "app": "web"}) == 0
    assert [w.reported for w in written if w.reported] == [{"web": 0}, {"web": 2}]
    target.failing = {"web"}  # and once more: a new difference, reported anew
    decide(act, 2, web=3)
    passes(act, 0.5)
    assert reports[2:] == [{"web": 2}]


def test_the_process_targets_crash_loop_through_the_actuator_backs_off_and_is_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from streams.decider.targets.process import ProcessTarget

    command = "sh -c 'test \"$TRIBUNAL_APP\" = batch && exit 3; exec sleep 600'"
    target = ProcessTarget(command, tmp_path, grace=0.5, start_seconds=3.0)
    journal = Journal()
    act = Actuator(Settings(), "p", target, election=False, journal=journal, interval=0.05, report_after=1.0)
    reports = told(act)
    decide(act, 1, web=1, batch=1)
    try:
        with caplog.at_level(logging.INFO):
            passes(act, 2.5)
        assert reports == [{"batch": 0}]
        starts = caplog.text.count("started copy 0 of p/batch")
        assert 2 <= starts <= 4, caplog.text  # 0, 0 and 0.5 s, then 1 s apart: not every 50 ms pass
        assert caplog.text.count("p/batch runs 0, 1 applied: put back") == 2  # a first quick death is an accident
        assert act.metrics.registry.get_sample_value("tribunal_actuator_restarts_total",
                                                     {"pool": "p", "app": "batch"}) == starts - 1
        assert act.metrics.registry.get_sample_value("tribunal_actuator_restart_backoff_seconds",
                                                     {"pool": "p", "app": "batch"}) >= 0.5
        assert act.failing["batch"].startswith("crash loop: copy 0 exited with status 3")
        assert [w.reported for w in journal.written if w.reported] == [{"batch": 0}]
        assert all("crash loop" in w.failed["batch"] for w in journal.written[1:] if "batch" in w.failed)
        decide(act, 2, batch=0)  # the decider took the report in
        passes(act, 0.3)
        assert act.failing == {} and target.crashes[("p", "batch")] == {} and reports == [{"batch": 0}]
        assert asyncio.run(target.observe("p", ["web", "batch"])) == {"web": 1, "batch": 0}
    finally:
        asyncio.run(target.stop_all("p"))
