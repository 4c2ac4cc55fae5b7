"""The scheduler client: seed 001's pseudo-code as a library a scheduler process embeds.

A scheduler registers itself (an ephemeral node with its n and M), follows its own limit on
`rejection-limits` and its group's offers on `job-offers`, and takes an offered job by creating
the job's ephemeral owner node (the lock: whoever creates it runs the job). It acquires only while
it holds fewer than N jobs and is not on the offline list; on the offline list it acquires
nothing and releases its jobs one by one as each finishes its current run (`drain_interval`),
until it holds none. Holding more than M jobs emits an alert.

The limits come from the log, not from this process's watches; the client only asks ZooKeeper
for what ZooKeeper is for: its own liveness, the lock, and the offline list. When its session is
lost its owner nodes are gone, so it stops every job at once (another scheduler may already hold
them) and registers again.

A partition does not end the session, it suspends it, and kazoo says LOST only once it reaches a
server again: meanwhile the server expires the session and another scheduler takes the jobs. So
the jobs are stopped when the session is *suspended* (kazoo says so when no answer came for two
thirds of the session timeout; the server expires it no sooner than the whole timeout after it
last heard from the client), and nothing is taken until it is connected again. Back within the
session, the owner nodes are still this scheduler's, and its jobs start again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schemas.groups import JobOffers, RejectionLimit, SchedulerAlert
from streams import kafka
from streams.core.groups import JOB_OFFERS, REJECTION_LIMITS
from streams.settings import Settings
from streams.topics import SCHEDULER_ALERTS
from streams.zk.election import SessionState, session
from streams.zk.layout import Layout, registration

log = logging.getLogger(__name__)


def over_threshold(group: str, scheduler: str, held: int, threshold: int) -> bytes:
    """The `SchedulerAlert` a scheduler writes when it holds more jobs than its alarm threshold."""
    return SchedulerAlert(group=group, scheduler=scheduler, X=held, M=threshold,
                          message=f"{scheduler} holds {held} jobs, over its alarm threshold {threshold}: "
                                  "add machines").model_dump_json().encode()


@dataclass
class SchedulerClient:
    settings: Settings
    group: str
    scheduler: str
    address: str = ""
    fault_tolerance: int = 1
    alarm_threshold: int = 10
    layout: Layout = field(default_factory=Layout)
    session_timeout: float = 6.0
    drain_interval: float = 0.5
    on_start: Callable[[str], None] = lambda job: None
    on_stop: Callable[[str], None] = lambda job: None
    held: set[str] = field(default_factory=set)
    limit: dict[str, Any] | None = None  # this scheduler's latest RejectionLimit
    offers: dict[str, str] = field(default_factory=dict)
    offline: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _session: SessionState = field(default_factory=SessionState)
    paused: bool = False  # its jobs stopped while its session is suspended (their owner nodes still its own)
    _last_release: float = 0.0
    _alerts: list[bytes] = field(default_factory=list)  # produced by `run` after each pass

    # -- ZooKeeper ------------------------------------------------------------------------------
    def _register(self) -> None:
        from kazoo.exceptions import NodeExistsError

        self.layout.ensure(self.zk, self.group)
        node = self.layout.node(self.group, "schedulers", self.scheduler)
        data = registration(self.address, self.fault_tolerance, self.alarm_threshold)
        try:
            self.zk.create(node, data, ephemeral=True)
        except NodeExistsError:  # our previous session's node, not yet expired: take it over
            self.zk.delete(node)
            self.zk.create(node, data, ephemeral=True)
        log.info("%s registered in group %s (n=%d, M=%d)", self.scheduler, self.group, self.fault_tolerance,
                 self.alarm_threshold)

    def _on_state(self, state: str) -> None:
        self._session.on_state(state)
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self._wake.set)

    def _watch_offline(self) -> None:
        path = self.layout.node(self.group, "offline", self.scheduler)

        def on_change(data: bytes | None, stat: Any) -> None:
            self.offline = stat is not None
            self.loop.call_soon_threadsafe(self._wake.set)

        self.zk.DataWatch(path, on_change)

    def try_acquire(self, job: str) -> bool:
        """Take `job` through its owner node; False if another scheduler holds it or it no longer exists."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        if not self.zk.exists(self.layout.node(self.group, "jobs", job)):
            return False
        try:
            self.zk.create(self.layout.node(self.group, "owners", job), self.scheduler.encode(), ephemeral=True)
        except (NodeExistsError, NoNodeError):
            return False
        self.held.add(job)
        self.on_start(job)
        return True

    def release(self, job: str) -> None:
        from kazoo.exceptions import NoNodeError

        if job not in self.held:
            return
        self.held.discard(job)
        if not self.paused:  # a paused job was stopped already
            self.on_stop(job)
        with contextlib.suppress(NoNodeError):
            self.zk.delete(self.layout.node(self.group, "owners", job))

    # -- the loop ---------------------------------------------------------------------------------
    def may_acquire(self) -> bool:
        if self.offline or self.limit is None:
            return False
        return len(self.held) < int(self.limit["N"])

    def _alert(self) -> None:
        self._alerts.append(over_threshold(self.group, self.scheduler, len(self.held), self.alarm_threshold))

    def step(self) -> None:
        """One pass of the pseudo-code; ZooKeeper being unreachable for a while only skips passes."""
        from kazoo.exceptions import KazooException

        try:
            self._step()
        except KazooException as e:
            log.warning("%s: ZooKeeper did not answer (%r); trying again", self.scheduler, e)

    def _step(self) -> None:
        if self._session.session_lost.is_set():
            for job in sorted(self.held):
                self.held.discard(job)
                if not self.paused:
                    self.on_stop(job)
            self.paused = False
            log.warning("%s lost its ZooKeeper session: stopped all jobs; registering again", self.scheduler)
            self._register()
            self._session.session_lost.clear()
            return
        if not self._session.connected.is_set():
            if self.held and not self.paused:
                for job in sorted(self.held):
                    self.on_stop(job)
                log.warning("%s: ZooKeeper connection suspended: stopped its %d job(s) (their owner nodes may be "
                            "expiring); taking none until it is back", self.scheduler, len(self.held))
            self.paused = True
            return
        if self.paused:
            self.paused = False
            if self.held:
                for job in sorted(self.held):
                    self.on_start(job)
                log.info("%s: ZooKeeper connection back within the session: its %d job(s) started again",
                         self.scheduler, len(self.held))
        if self.offline:
            now = time.monotonic()
            if self.held and now - self._last_release >= self.drain_interval:
                self._last_release = now
                self.release(sorted(self.held)[0])  # the job that finishes its current run first
                if not self.held:
                    log.info("%s drained", self.scheduler)
            return
        for job, sid in sorted(self.offers.items()):
            if sid != self.scheduler or job in self.held:
                continue
            if not self.may_acquire():
                break
            if self.try_acquire(job) and len(self.held) > self.alarm_threshold:
                self._alert()

    def _follow(self, record: Any) -> None:
        """Take the latest limit and offers of this scheduler's group; a record that cannot be read is logged and
        passed over (`kafka.json_object`)."""
        value = kafka.json_object(record)
        if value is None or value.get("group") != self.group:
            return
        if record.topic == self.settings.topic(REJECTION_LIMITS):
            if value.get("scheduler") == self.scheduler and kafka.validated(record, value, RejectionLimit) is not None:
                self.limit = value
        elif (offers := kafka.validated(record, value, JobOffers)) is not None:
            self.offers = dict(offers.offers)

    async def run(self, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        async with session(self.settings.zookeeper_hosts, self.session_timeout, self._on_state) as self.zk:
            await self._serve(stop)

    async def _serve(self, stop: asyncio.Event) -> None:
        consumer = kafka.consumer(self.settings.kafka_bootstrap, self.settings.topic(REJECTION_LIMITS),
                                  self.settings.topic(JOB_OFFERS), auto_offset_reset="earliest")
        producer = kafka.producer(self.settings.kafka_bootstrap)
        await consumer.start()
        await producer.start()
        try:
            await asyncio.to_thread(self._register)
            await asyncio.to_thread(self._watch_offline)
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                for records in batch.values():
                    for record in records:
                        self._follow(record)
                await asyncio.to_thread(self.step)
                for alert in self._alerts:
                    await producer.send(self.settings.topic(SCHEDULER_ALERTS), alert, key=self.group.encode())
                self._alerts.clear()
                if not batch:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self.drain_interval if self.offline else 0.2)
                    self._wake.clear()
        finally:
            for job in sorted(self.held):
                self.release(job)
            await consumer.stop()
            await producer.stop()
