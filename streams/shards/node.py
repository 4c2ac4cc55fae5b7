"""`ShardNode`: a scheduler node of one job set (seed 003), as a library a node process embeds.

It registers itself in ZooKeeper (`/live/{node}` ephemeral, `/all/{node}` persistent), follows
its job set's plans on `shard-plans`, and for each task its plan gives it, calls the user's
coroutine at the task's slots (every `period` seconds, offset by task, the same slots on any
node). On each new plan it stops every run of a task no longer its own, waits for them to end,
and only then acknowledges the epoch on `shard-acks`; it starts nothing new until the plan is
released (every awaited node acknowledged), `/shard` is absent and its lease holds (`Gate`).

A node stops every run the moment its session is SUSPENDED or LOST, as ElasticJob does, and
registers again when it can; a new registration is a new incarnation, and the node acts only on
plans made for its own (a plan from before its session was lost is not its to act on). Tasks it
gains from a node that was lost are run at once (failover), once per task and epoch. The node
that creates `/election/leader` also leads (`streams.shards.leader`).

Every run is written to the run log (if any) as a start and an end line carrying the epoch; the
end says until when the node held the task (`held_until`): the end itself, or the moment its
lease ran out if it found that later (a frozen process), whose run is then `fenced`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.shards import ShardPlan
from streams import kafka
from streams.core.shards import SHARD_ACKS, SHARD_PLANS, plans
from streams.settings import Settings
from streams.shards.gate import Gate
from streams.shards.layout import DEFAULT_SHARD_ROOT, ShardLayout
from streams.shards.leader import Leader
from streams.zk.election import session
from streams.zk.publisher import Publisher

log = logging.getLogger(__name__)
TICK = 0.05  # seconds between the scheduler's looks at what is due


@dataclass(frozen=True)
class Execution:
    """One run of a task: its id and epoch (a fencing token for whatever the task writes)."""

    task: int
    epoch: int
    failover: bool
    node: ShardNode

    def holds(self) -> bool:
        """Whether the node still holds this task in this epoch (check before each step of long work)."""
        return self.node.holds(self.task, self.epoch)


Run = Callable[[Execution], Awaitable[object]]  # what it returns as an int is the run's exit status


class RunLog:
    """Start and end lines, one JSON object each, flushed as written (a killed node loses none it wrote)."""

    def __init__(self, path: Path | None) -> None:
        self.file = path.open("a", buffering=1) if path is not None else None

    def write(self, line: dict[str, Any]) -> None:
        if self.file is not None:
            self.file.write(json.dumps(line, sort_keys=True) + "\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class ShardNode:
    def __init__(self, settings: Settings, job_set: str, node: str, address: str, run: Run, *,
                 period: float = 5.0, session_timeout: float = 6.0, grace: float = 2.0,
                 snapshot_interval: float = 30.0, root: str = DEFAULT_SHARD_ROOT, run_log: Path | None = None,
                 lease_share: float = 0.8) -> None:
        self.settings, self.job_set, self.node, self.address, self.run = settings, job_set, node, address, run
        self.period, self.session_timeout, self.grace = period, session_timeout, grace
        self.snapshot_interval, self.lease_share = snapshot_interval, lease_share
        self.layout = ShardLayout(job_set, root)
        self.gate = Gate(node)
        self.runs: dict[int, tuple[asyncio.Task[None], int]] = {}  # task -> (its run, the epoch it started under)
        self.ending: dict[asyncio.Task[None], int] = {}  # runs told to stop that have not ended yet -> their task
        self.stop_reason: dict[asyncio.Task[None], str] = {}
        self.acked_at = 0.0  # when (monotonic) this node last acknowledged
        self.due: dict[int, float] = {}  # task -> when (wall clock) it next runs
        self.failover: set[int] = set()  # tasks to run at once, taken over from a lost node
        self.failed_over: set[tuple[int, int]] = set()  # (task, epoch) failover runs made: once each
        self.released: dict[str, Any] | None = None  # the last released plan this node ran under
        self.pauses_heard = 0  # calls of the `/shard` watch so far (`_ask_paused`)
        self.incarnation = 0
        self.session_id = 0
        self.run_log = RunLog(run_log)
        self.counter = itertools.count(1)
        self.registering: asyncio.Task[None] | None = None
        self.zk: Any = None
        self.publisher: Publisher | None = None
        self.leader: Any = None
        self.stopping = asyncio.Event()
        bind = getattr(run, "bind", None)
        if callable(bind):  # runs as processes (`CommandRuns`): they are this node's
            bind(job_set, node)

    # -- what the gate decides ---------------------------------------------------------------------
    def holds(self, task: int, epoch: int) -> bool:
        return self.gate.leased(time.monotonic()) and self.gate.connected and task in self.runs \
            and self.runs[task][1] == epoch and plans.owns(self.gate.mine, task)

    @property
    def lease(self) -> float:
        """How long an answer from ZooKeeper holds: a share of the session timeout, and never of more than 40 s,
        ZooKeeper's default `maxSessionTimeout` (a server that grants less than asked is not told to the client;
        a tighter `maxSessionTimeout` needs a `--session-timeout` within it)."""
        return self.lease_share * min(self.session_timeout, 40.0)

    def _lease_wall(self) -> float:
        return time.time() + (self.gate.lease_until - time.monotonic())

    # -- ZooKeeper ---------------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:  # kazoo's thread
        self.loop.call_soon_threadsafe(self._state_changed, state)

    def _state_changed(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.CONNECTED:
            self.gate.connected = True
            if not self.gate.registered and self.zk is not None:  # None: still starting (`serve` registers)
                self._register_soon()
            return
        self.gate.connected = False
        if state == KazooState.LOST:
            log.warning("%s: ZooKeeper session lost: every run stopped; registering again when connected", self.node)
            self.gate.registered, self.gate.acked, self.gate.mine = False, 0, ()
            self.released, self.failover = None, set()  # the next incarnation starts afresh
        else:
            log.warning("%s: ZooKeeper connection suspended: every run stopped", self.node)
        self._cancel(list(self.runs), "session " + str(state).lower())  # at once: their ends are logged as they go

    def _register_soon(self) -> None:
        if self.registering is None or self.registering.done():
            self.registering = asyncio.ensure_future(self._register())

    async def _register(self) -> None:
        waited = False
        while not self.stopping.is_set() and self.gate.connected and not self.gate.registered:
            try:
                found = await asyncio.to_thread(self._try_register)
            except Exception as e:  # noqa: BLE001  (a connection lost under us: try again)
                log.warning("%s: registering failed: %r", self.node, e)
                await asyncio.sleep(0.5)
                continue
            if found is not None:
                self.incarnation, self.session_id, started = found
                self.gate.incarnation, self.gate.registered = self.incarnation, True
                self.gate.lease_until = started + self.lease
                await self._leased()
                log.info("%s registered in job set %s (incarnation %d)", self.node, self.job_set, self.incarnation)
                if self.gate.plan is not None:
                    await self._on_plan(self.gate.plan)
                return
            if not waited:
                log.warning("%s: /live/%s is held by another session (our previous one, or a second process "
                            "with this id): waiting for it to go", self.node, self.node)
                waited = True
            await asyncio.sleep(0.5)

    def _try_register(self) -> tuple[int, int, float] | None:
        from kazoo.exceptions import NodeExistsError

        zk, lay = self.zk, self.layout
        for path in (lay.live, lay.all, lay.election):
            zk.ensure_path(path)
        started = time.monotonic()
        session_id = zk.client_id[0]
        stat = zk.exists(lay.live_node(self.node))
        if stat is not None and stat.ephemeralOwner != session_id:
            return None
        if stat is None:
            try:
                _, stat = zk.create(lay.live_node(self.node), self.address.encode(), ephemeral=True,
                                    include_data=True)
            except NodeExistsError:
                return None
        try:
            zk.create(lay.all_node(self.node), self.address.encode())
        except NodeExistsError:
            zk.set(lay.all_node(self.node), self.address.encode())
        return int(stat.czxid), session_id, started

    async def _renew(self) -> None:
        """The lease: each answer ZooKeeper gives this session about its own live node extends it."""
        while not self.stopping.is_set():
            await asyncio.sleep(self.session_timeout / 6)
            if not (self.gate.connected and self.gate.registered):
                continue
            started = time.monotonic()
            try:
                stat = await asyncio.to_thread(self.zk.exists, self.layout.live_node(self.node))
            except Exception as e:  # noqa: BLE001  (the session's state listener says what happened)
                log.info("%s: lease not renewed: %r", self.node, e)
                continue
            if stat is not None and stat.ephemeralOwner == self.session_id:
                self.gate.lease_until = max(self.gate.lease_until, started + self.lease)
                await self._leased()
                self._ack_again()
                if self.gate.paused:
                    await self._ask_paused()
            elif self.gate.registered:
                log.warning("%s: its live node is gone while connected: stopping and registering again", self.node)
                self.gate.registered, self.gate.acked, self.gate.mine = False, 0, ()
                await self._stop(list(self.runs), "deregistered")
                self._register_soon()

    async def _leased(self) -> None:
        """Runs kept by a process of their own (`CommandRuns`) hear of each lease: should this process freeze, that
        one ends them when the lease runs out, before the session can expire and their tasks move."""
        tell = getattr(self.run, "lease", None)
        if callable(tell):
            await tell(self.gate.lease_until)

    def _watch_pause(self) -> None:  # on a thread: the recipe reads ZooKeeper when made
        def paused(data: bytes | None, stat: Any) -> None:  # kazoo's thread
            self.loop.call_soon_threadsafe(self._pause_heard, stat is not None)

        self.zk.DataWatch(self.layout.shard, paused)

    def _pause_heard(self, paused: bool) -> None:
        self.gate.paused = paused
        self.pauses_heard += 1

    async def _ask_paused(self) -> None:
        """Set the gate's pause from ZooKeeper's own answer (`_paused_now`), unless the watch spoke while it was
        asked (its word is the newer). An answer that cannot be had leaves the node paused, and `_renew` asks again
        while it is: kazoo's watch calls back only when `/shard`'s version changed, so a node paused for want of an
        answer while `/shard` stayed absent (a session just healed) would otherwise wait for the next reshard."""
        heard = self.pauses_heard
        try:
            paused = await asyncio.to_thread(self._paused_now)
        except Exception as e:  # noqa: BLE001  (asked again while paused)
            log.info("%s: could not ask whether /shard exists: %r", self.node, e)
            paused = True
        if self.pauses_heard == heard:
            self.gate.paused = paused

    def _paused_now(self) -> bool:
        """Whether `/shard` exists, asked after a sync: the pause and the plans travel separately (ZooKeeper,
        Kafka), so before taking a released epoch a node asks ZooKeeper itself rather than await the watch."""
        self.zk.sync(self.layout.shard)
        return self.zk.exists(self.layout.shard) is not None

    # -- plans ---------------------------------------------------------------------------------------
    async def _follow(self, consumer: Any) -> None:
        key = self.job_set.encode()
        while not self.stopping.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            latest: dict[str, Any] | None = None
            for records in batch.values():
                for record in records:
                    if record.key == key and record.value:
                        plan = kafka.json_object(record)  # one that cannot be read is logged and passed over
                        if plan is None or kafka.validated(record, plan, ShardPlan) is None:
                            continue
                        if latest is None or plan["seq"] > latest["seq"]:
                            latest = plan
            if latest is not None:
                await self._on_plan(latest)

    async def _on_plan(self, plan: dict[str, Any]) -> None:
        if self.leader is not None:
            self.leader.saw(plan)
        if not self.gate.see(plan):
            return
        await self._stop([t for t in self.runs if not plans.owns(self.gate.mine, t)], "revoked")
        if self.ending:  # runs stopped earlier (a suspended session) that are still winding down
            await asyncio.gather(*self.ending, return_exceptions=True)
        if not self.gate.ours(plan):
            return  # made for an earlier incarnation, or none: it owns nothing in it
        epoch = plan["epoch"]
        if self.node in plan["awaiting"] and self.gate.acked <= epoch:
            self.gate.acked = epoch
            self._ack(epoch)
        if plan["released"] and self.gate.acked == epoch and (self.released or {}).get("epoch") != epoch:
            await self._ask_paused()
            self._take(plan)

    def _ack(self, epoch: int) -> None:
        assert self.publisher is not None
        self.acked_at = time.monotonic()
        self.publisher.submit(self.settings.topic(SHARD_ACKS), self.job_set,
                              {"type": "ShardAck", "job_set": self.job_set, "node": self.node, "epoch": epoch})

    def _ack_again(self) -> None:
        """An acknowledgement is re-sent while its plan still awaits it (one lost on its way would stall the epoch)."""
        plan = self.gate.plan
        if plan is not None and self.node in plan["awaiting"] and self.gate.acked == plan["epoch"] \
                and self.gate.ours(plan) and not self.ending and time.monotonic() - self.acked_at > 2.0:
            self._ack(plan["epoch"])

    def _take(self, plan: dict[str, Any]) -> None:
        """A released plan this node acknowledged: what it gained from lost nodes runs at once."""
        before = self.released
        self.released = plan
        if before is None:
            return
        for first, last, old, new in plans.changes(before["ranges"], plan["ranges"]):
            if new == self.node and old not in plan["nodes"]:
                self.failover.update(range(first, last + 1))
        if self.failover:
            log.info("%s: epoch %d: %d task(s) of lost node(s) to run at once", self.node, plan["epoch"],
                     len(self.failover))

    # -- runs ------------------------------------------------------------------------------------------
    def slot(self, task: int, now: float) -> float:
        """The task's next slot at or after `now`: every `period`, offset by the task, on every node alike."""
        offset = (zlib.crc32(str(task).encode()) % 1000) / 1000 * self.period
        return (((now - offset) // self.period) + 1) * self.period + offset

    async def _schedule(self) -> None:
        while not self.stopping.is_set():
            await asyncio.sleep(TICK)
            mono, now = time.monotonic(), time.time()
            if self.runs and not self.gate.leased(mono):
                await self._stop(list(self.runs), "fenced: lease expired")
            plan = self.gate.plan
            if plan is None or not self.gate.mine:
                continue
            epoch = plan["epoch"]
            if self.gate.refusal_any(epoch, mono) is not None:
                continue
            winding = set(self.ending.values())
            for first, last in self.gate.mine:
                for task in range(first, last + 1):
                    if task in self.runs or task in winding:
                        continue
                    failover = task in self.failover and (task, epoch) not in self.failed_over
                    due = self.due.get(task)
                    if due is None:
                        due = self.due[task] = self.slot(task, now)
                    if (failover or due <= now) and self.execute(task, epoch, failover):
                        self.failover.discard(task)

    def execute(self, task: int, epoch: int, failover: bool = False) -> bool:
        """Start a run of `task` under `epoch`, unless the gate refuses it (a stale epoch among the reasons)."""
        refusal = self.gate.refusal(task, epoch, time.monotonic())
        if refusal is not None:
            self.run_log.write({"event": "refused", "node": self.node, "task": task, "epoch": epoch,
                                "at": time.time(), "why": refusal})
            return False
        if failover:
            self.failed_over = {(t, e) for t, e in self.failed_over if e == epoch} | {(task, epoch)}
        self.due[task] = self.slot(task, time.time() + self.period / 2)
        self.runs[task] = (asyncio.ensure_future(self._execute(task, epoch, failover)), epoch)
        return True

    async def _execute(self, task: int, epoch: int, failover: bool) -> None:
        number = f"{os.getpid()}.{next(self.counter)}"  # unique across restarts of the node
        self.run_log.write({"event": "start", "node": self.node, "run": number, "task": task, "epoch": epoch,
                            "failover": failover, "at": time.time()})
        outcome, status = "done", None
        try:
            result = await self.run(Execution(task, epoch, failover, self))
            status = result if isinstance(result, int) else None
        except asyncio.CancelledError:
            outcome = self.stop_reason.pop(asyncio.current_task(), "stopped")  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001  (a task's failure is the task's, not the node's)
            log.warning("%s: task %d failed: %r", self.node, task, e)
            outcome, status = "failed", getattr(e, "status", None)
        end, held = time.time(), self._lease_wall()
        if held < end and outcome in ("done", "failed"):
            outcome = "fenced"  # it ended after its lease (or was ended by it): what it did then is not to be trusted
        self.run_log.write({"event": "end", "node": self.node, "run": number, "task": task, "epoch": epoch,
                            "at": end, "held_until": min(end, held), "outcome": outcome,
                            **({} if status is None else {"status": status})})
        current = self.runs.get(task)
        if current is not None and current[0] is asyncio.current_task():
            del self.runs[task]
        self.ending.pop(asyncio.current_task(), None)  # type: ignore[arg-type]

    def _cancel(self, tasks: list[int], why: str) -> list[asyncio.Task[None]]:
        handles = []
        for task in tasks:
            entry = self.runs.pop(task, None)
            if entry is not None:
                self.stop_reason[entry[0]] = why
                self.ending[entry[0]] = task
                entry[0].cancel()
                handles.append(entry[0])
        return handles

    async def _stop(self, tasks: list[int], why: str) -> None:
        """Stop these runs and wait until each has ended (revoke before acknowledging)."""
        handles = self._cancel(tasks, why)
        if handles:
            await asyncio.gather(*handles, return_exceptions=True)

    # -- the whole -------------------------------------------------------------------------------------
    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then stop every run and leave (the live node goes with the session). Runs that
        are processes (`CommandRuns`) are entered for the node's whole life: their leftovers ended before it
        registers, their guardian closed after the last run ended."""
        bound = self.run if isinstance(self.run, contextlib.AbstractAsyncContextManager) else contextlib.nullcontext()
        async with bound:
            await self._serve(stop)

    async def _serve(self, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        consumer = kafka.consumer(self.settings.kafka_bootstrap, self.settings.topic(SHARD_PLANS),
                                  auto_offset_reset="earliest")
        await consumer.start()
        try:
            async with Publisher(self.settings.kafka_bootstrap) as publisher:
                self.publisher = publisher
                async with session(self.settings.zookeeper_hosts, self.session_timeout, self._on_state) as zk:
                    self.zk = zk
                    self.gate.connected = True
                    await self._register()
                    await asyncio.to_thread(self._watch_pause)
                    self.leader = Leader(self, publisher)
                    workers = [asyncio.ensure_future(c) for c in (self._follow(consumer), self._renew(),
                                                                   self._schedule(), self.leader.stand())]
                    try:
                        done = asyncio.ensure_future(stop.wait())
                        await asyncio.wait([done, *workers], return_when=asyncio.FIRST_COMPLETED)
                    finally:  # every run ends before the session (and the live node with it) does
                        self.stopping.set()
                        for worker in workers:
                            worker.cancel()
                        await self._stop(list(self.runs), "node stopping")
                        if self.ending:
                            await asyncio.gather(*self.ending, return_exceptions=True)
                        self.leader.resign()
                    for worker in workers:
                        with contextlib.suppress(asyncio.CancelledError):
                            exc = worker.exception() if worker.done() else None
                            if exc is not None:
                                raise exc
        finally:
            await consumer.stop()
            self.run_log.close()
