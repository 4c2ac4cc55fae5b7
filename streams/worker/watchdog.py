"""A stall watchdog: restart the worker in place when an input partition stops being consumed.

Seen here under repeated SIGKILLs (tests/worker/test_crash.py), and reported upstream for Faust
and other Kafka stream processors: after a rebalance an assigned partition is silently never
fetched again; the worker looks healthy while that partition's lag grows. Nothing inside Faust
could be found to nudge it, and a fresh process gets a fresh assignment and consumes it.

So every few seconds the watchdog compares, for each input partition this worker owns, the
group's committed offset with the partition's end offset. When a partition has records waiting
and its committed offset has not moved for `stall_timeout` seconds of normal running (recovery
and rebalances do not count), the worker logs why and re-executes itself (`os.execv`): same pid,
same arguments, a fresh Faust. Exactly-once makes that as safe as any crash. "Records waiting"
is asked of Kafka before a restart: what lies past the committed offset may be only transaction
markers (every forward to a repartition topic is written in a transaction, and so is every
redriven dead letter), which no consumer is ever handed, and a quiet partition must not cost a
restart every `stall_timeout`.

A worker can also hang in a rebalance: seen in the combined-faults day, a join answered
`RebalanceInProgressError` while a broker was away and the worker never joined again, its partitions
unowned. A rebalance that has not ended (recovery aside: that one progresses and may take long) after
`JOIN_PATIENCE` stall timeouts restarts the worker in place as well. That check runs on its own from the first
rebalance on (`guard_joins`): Faust starts its timers only once the first recovery is complete, and a worker that
never joined had never been checked (CI: a worker restarted while a broker was down hung in its first join).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import KafkaError

from streams.worker.metrics import RESTARTS_ENV, restarts_in_place
from streams.worker.sideband import Sideband
from streams.worker.surface import App

log = logging.getLogger(__name__)
JOIN_PATIENCE = 4  # stall timeouts a rebalance may take, recovery aside, before the worker restarts in place
JOIN_CHECK_EVERY = 5.0  # seconds between two looks at a rebalance under way


@dataclass
class Watchdog:
    app: App
    bootstrap: str
    inputs: set[str]
    stall_timeout: float
    first_offset_from: Callable[[str, int, int, int], Awaitable[int | None]]  # the first record in [start, end)
    _seen: dict[Any, tuple[int, float]] = field(default_factory=dict)  # tp -> (committed, since)
    _joining_since: float | None = None  # when the rebalance under way (before its recovery) began
    _join_guard: asyncio.Future[None] | None = None
    sideband: Sideband = field(init=False)

    def __post_init__(self) -> None:
        self.sideband = Sideband(self.bootstrap)

    def guard_joins(self, every: float = JOIN_CHECK_EVERY) -> None:
        """Check every `every` s, from now on until the app stops, that a rebalance ends (`check_join`); the first
        call starts it."""
        if self._join_guard is None:
            async def guard() -> None:
                while not self.app.should_stop:  # a worker stopping is not one stuck in a join
                    try:
                        self.check_join()
                    except Exception:
                        log.exception("the join guard's check failed")
                    await asyncio.sleep(every)

            self._join_guard = asyncio.ensure_future(guard())

    def check_join(self) -> None:
        joining = self.app.rebalancing and not self.app.in_recovery
        now = time.monotonic()
        self._joining_since = (self._joining_since or now) if joining else None
        if self._joining_since is not None and now - self._joining_since >= JOIN_PATIENCE * self.stall_timeout:
            log.error("a rebalance has not ended for %.0fs (no recovery under way): restarting the worker in place",
                      now - self._joining_since)
            restart_in_place()

    async def check(self) -> None:
        if self.app.in_recovery or self.app.rebalancing:
            self._seen.clear()  # only time spent running normally counts
            return
        from aiokafka import TopicPartition

        owned = [TopicPartition(tp.topic, tp.partition) for tp in self.app.consumer.assignment()
                 if tp.topic in self.inputs]
        if not owned:
            return
        try:
            await self._compare(owned)
        except (TimeoutError, KafkaError, OSError) as error:
            # A broker gone (a replica of the cluster lost, a coordinator moving) must not end the worker: a
            # timer's exception would crash Faust's app. The stall clock keeps running; the next check asks again.
            log.warning("stall check skipped: the cluster did not answer (%s)", error)

    async def _compare(self, owned: list[Any]) -> None:
        consumer, _ = await self.sideband.clients()
        ends = await consumer.end_offsets(owned)
        committed = await self.sideband.committed(self.app.conf.id, owned)
        now = time.monotonic()
        for tp in owned:
            done = committed[tp]
            previous = self._seen.get(tp)
            if previous is None or previous[0] != done or ends[tp] <= done:
                self._seen[tp] = (done, now)
            elif now - previous[1] >= self.stall_timeout:
                if await self.first_offset_from(tp.topic, tp.partition, done, ends[tp]) is None:
                    self._seen[tp] = (done, now)  # only transaction markers past the committed offset
                    continue
                log.error("input partition %s[%d] has %d records waiting and its committed offset has stayed at %d "
                          "for %.0fs: restarting the worker in place", tp.topic, tp.partition, ends[tp] - done,
                          done, now - previous[1])
                restart_in_place()


def fenced(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) is Kafka's word that a newer producer took this one's transactional id."""
    from aiokafka.errors import ProducerFenced

    while error is not None:
        if isinstance(error, ProducerFenced):
            return True
        error = error.__cause__ or error.__context__
    return False


def restart_if_fenced(error: BaseException) -> None:
    """A zombie (the group gave its partitions away while it could not answer, and their new owner's producers
    fenced its own) says so in one line and restarts in place, rejoining the group; any other error returns."""
    if fenced(error):
        log.error("this worker was fenced: another worker took its partitions while it could not reach the brokers "
                  "(a network partition, a long pause) and its open transactions were aborted, so nothing it wrote "
                  "since its last commit is visible; restarting to rejoin the group (%s)", error)
        restart_in_place()


def restart_in_place() -> None:
    """Re-execute this process with the same arguments (no cleanup: exactly-once covers a crash)."""
    os.environ[RESTARTS_ENV] = str(restarts_in_place() + 1)  # the one count a re-execution keeps (`/metrics`)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.argv])
