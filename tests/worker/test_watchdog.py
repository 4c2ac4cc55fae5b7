"""The watchdog's patience with a rebalance that never ends (a join answered RebalanceInProgressError while a
broker was away, in the combined-faults day): no broker needed, the app's two flags are what it reads."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from streams.worker import watchdog
from streams.worker.watchdog import JOIN_PATIENCE, Watchdog


class Consumer:
    def assignment(self) -> set[Any]:
        return set()


@dataclass
class Flags:
    rebalancing: bool = False
    in_recovery: bool = False
    should_stop: bool = False
    consumer: Consumer = field(default_factory=Consumer)


def test_a_rebalance_that_does_not_end_restarts_the_worker_and_a_long_recovery_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    restarts: list[int] = []
    monkeypatch.setattr(watchdog, "restart_in_place", lambda: restarts.append(1))
    clock = [1000.0]
    monkeypatch.setattr(watchdog.time, "monotonic", lambda: clock[0])
    app: Any = Flags()
    dog = Watchdog(app, "127.0.0.1:1", set(), stall_timeout=1.0, first_offset_from=None)  # type: ignore[arg-type]

    def at(seconds: float, **flags: bool) -> None:
        clock[0] = 1000.0 + seconds
        for name, value in flags.items():
            setattr(app, name, value)
        dog.check_join()
        asyncio.run(dog.check())

    at(0, rebalancing=True)
    at(JOIN_PATIENCE - 0.5)
    assert restarts == []
    at(1.0 * JOIN_PATIENCE + 0.1)
    assert restarts == [1]  # a join that never ends
    at(20, in_recovery=True)  # recovering: progress of its own, however long
    at(200)
    assert restarts == [1]
    at(201, rebalancing=False, in_recovery=False)  # running: owns nothing here, so nothing to compare
    at(202, rebalancing=True)
    at(202 + JOIN_PATIENCE - 0.5)
    assert restarts == [1]  # the patience starts again with each rebalance


def test_a_fenced_producer_is_told_apart_through_the_errors_it_caused() -> None:
    from aiokafka.errors import KafkaError, ProducerFenced

    from streams.worker.watchdog import fenced

    try:
        try:
            raise ProducerFenced()
        except ProducerFenced as cause:
            raise RuntimeError("writing a batch") from cause
    except RuntimeError as wrapped:
        assert fenced(wrapped)
    assert not fenced(KafkaError()) and not fenced(None)


def test_the_join_guard_looks_from_the_first_rebalance_before_any_timer_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's timers start after the first recovery; a worker stuck in its first join is watched all the same."""
    restarts: list[float] = []
    monkeypatch.setattr(watchdog, "restart_in_place", lambda: restarts.append(time.monotonic()))
    app: Any = Flags(rebalancing=True)
    stall = 0.05
    dog = Watchdog(app, "127.0.0.1:1", set(), stall_timeout=stall, first_offset_from=None)  # type: ignore[arg-type]

    async def first_join() -> float:
        began = time.monotonic()
        dog.guard_joins(every=0.01)
        dog.guard_joins(every=0.01)  # one guard, however many rebalances start it
        while not restarts:
            await asyncio.sleep(0.01)
        assert dog._join_guard is not None
        app.should_stop = True  # the app stops: so does the guard
        await asyncio.wait_for(dog._join_guard, 1.0)
        return began

    began = asyncio.run(asyncio.wait_for(first_join(), 10))
    assert restarts[0] - began >= JOIN_PATIENCE * stall
