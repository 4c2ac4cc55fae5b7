"""The job set's leader: whichever node creates `/election/leader` (seed 003), until its session ends.

It turns what ZooKeeper says of `/live` into events on `shard-events` (each change as `NodeJoined`
/ `NodeLost`, and a `NodesSnapshot` on election and every `snapshot_interval`, which repairs a
lost watch), and it holds the seed's pause: on a change of the live set it creates `/shard` before
publishing, so no node starts anything until the plan for the new live set is published and
released (the fold's part: every surviving node acknowledged it). It then writes the plan as
`/live`'s data and removes `/shard`; after a loss it first waits `grace` more, beyond the lost
node's session expiry, for a node whose lease ran on a clock that drifted. The plan itself is the
fold's, not the leader's: a leader that dies mid-change loses nothing but its pause (ephemeral),
and the next leader raises it again until the plan matches the live set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from streams.core.shards import SHARD_EVENTS

if TYPE_CHECKING:
    from streams.settings import Settings
    from streams.shards.gate import Gate
    from streams.shards.layout import ShardLayout
    from streams.zk.publisher import Publisher

log = logging.getLogger(__name__)
Live = dict[str, tuple[str, int]]  # node -> (address, incarnation)


class Member(Protocol):
    """What a leader reads of the node it leads from (`streams.shards.node.ShardNode`, which starts it): the
    leader depends on this much, not on the node's module."""

    node: str
    address: str
    job_set: str
    session_id: int
    settings: Settings
    snapshot_interval: float
    grace: float
    stopping: asyncio.Event
    gate: Gate
    zk: Any
    layout: ShardLayout


class Leader:
    def __init__(self, node: Member, publisher: Publisher) -> None:
        self.node, self.publisher = node, publisher
        self.zk, self.layout = node.zk, node.layout
        self.lock = threading.Lock()  # kazoo's side: one read-and-publish of /live at a time, in order (the loop
        # never takes it: it is held across ZooKeeper calls)
        self.leading = False
        self.term = 0
        self.view: Live = {}
        self.plan: dict[str, Any] | None = None  # the newest plan record seen
        self.paused = False  # this leader holds `/shard`
        self.lost_in_pause = False
        self.matched_at: float | None = None  # when the released plan first matched the live set (monotonic)

    def saw(self, plan: dict[str, Any]) -> None:
        if self.plan is None or plan["seq"] > self.plan["seq"]:
            self.plan = plan  # one reference, assigned whole: read from kazoo's threads without a lock

    # -- election ------------------------------------------------------------------------------------
    async def stand(self) -> None:
        gate = self.node.gate
        while not self.node.stopping.is_set():
            if not (gate.connected and gate.registered):
                await asyncio.sleep(0.2)
                continue
            try:
                won = await asyncio.to_thread(self._try_lead)
            except Exception as e:  # noqa: BLE001  (the session is going: stand again when it is back)
                log.info("%s: election interrupted: %r", self.node.node, e)
                won = False
            if won:
                await self._lead()
            else:
                await self._leader_gone()

    def _try_lead(self) -> bool:
        from kazoo.exceptions import NodeExistsError

        try:
            self.zk.create(self.layout.leader, self.node.address.encode(), ephemeral=True)
            return True
        except NodeExistsError:
            stat = self.zk.exists(self.layout.leader)
            return stat is not None and stat.ephemeralOwner == self.zk.client_id[0]

    async def _leader_gone(self) -> None:
        gone = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            stat = await asyncio.to_thread(self.zk.exists, self.layout.leader,
                                           lambda event: loop.call_soon_threadsafe(gone.set))
        except Exception:  # noqa: BLE001
            stat = True
        if stat is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gone.wait(), timeout=self.node.snapshot_interval)
        await asyncio.sleep(0.05)

    def holding(self) -> bool:
        gate = self.node.gate
        return gate.registered and gate.connected and not self.node.stopping.is_set() \
            and self.node.session_id == self.zk.client_id[0]

    async def _lead(self) -> None:
        self.term += 1  # the loop alone changes the term (no lock: the kazoo side holds it across ZooKeeper calls)
        plan = self.plan  # start from what the log says, so that a node gone since is seen as lost
        self.view = {} if plan is None else {n: (a, plan["incarnations"][n]) for n, a in plan["nodes"].items()}
        self.leading, term = True, self.term
        log.info("%s leads job set %s (term %d)", self.node.node, self.node.job_set, term)
        try:
            await asyncio.to_thread(self.zk.ChildrenWatch, self.layout.live,
                                    lambda children: self._on_live(term))
            await asyncio.to_thread(self._snapshot, term)
            last_snapshot = time.monotonic()
            while self.holding():
                await asyncio.sleep(0.05)
                await self._maybe_lift()
                if time.monotonic() - last_snapshot >= self.node.snapshot_interval:
                    await asyncio.to_thread(self._snapshot, term)
                    last_snapshot = time.monotonic()
        except Exception as e:  # noqa: BLE001  (the session ended under us: stand again)
            log.warning("%s: leadership ended: %r", self.node.node, e)
        finally:
            self.leading = False
            self.term += 1
            log.info("%s no longer leads job set %s", self.node.node, self.node.job_set)

    def resign(self) -> None:
        self.leading = False
        self.term += 1

    # -- the live set (kazoo's threads) --------------------------------------------------------------
    def _read_live(self) -> tuple[Live, int]:
        """/live now: each child's address and incarnation, and the zxid it was read at: the parent's pzxid (the
        last change's zxid), or a child's czxid if later (a node that registered again between the two reads),
        so that the fold never takes the snapshot for one read before a registration it carries."""
        from kazoo.exceptions import NoNodeError

        children, parent = self.zk.get_children(self.layout.live, include_data=True)
        live: Live = {}
        for child in sorted(children):
            try:
                data, stat = self.zk.get(self.layout.live_node(child))
            except NoNodeError:
                continue
            live[child] = (bytes(data).decode("utf-8", "replace"), int(stat.czxid))
        return live, max([int(parent.pzxid), *(incarnation for _, incarnation in live.values())])

    def _on_live(self, term: int) -> bool:
        """The watch's call: /live is read afresh under the lock (not the children the watch was given, which a
        snapshot read since may have overtaken), so what is published only ever moves forward."""
        if term != self.term or not self.leading:
            return False  # an earlier term's watch: stop it
        with self.lock:
            if term == self.term:
                self._changed(self._read_live()[0])
        return True

    def _snapshot(self, term: int) -> None:
        with self.lock:
            if term != self.term:
                return
            live, zxid = self._read_live()
            self._changed(live)
            nodes = [{"node": n, "address": a, "incarnation": i} for n, (a, i) in sorted(live.items())]
            self.publisher.submit(self.node.settings.topic(SHARD_EVENTS), self.node.job_set,
                                  {"type": "NodesSnapshot", "job_set": self.node.job_set, "nodes": nodes, "zxid": zxid})
            plan = self.plan
            if not self._matches(plan):
                self._pause(plan is None or any(n not in live for n in plan["nodes"]))

    def _changed(self, live: Live) -> None:
        """Publish what changed against the leader's view, pausing first (under the lock)."""
        lost = sorted(set(self.view) - set(live))
        joined = sorted(n for n in live if self.view.get(n) != live[n])
        if not lost and not joined:
            return
        before, self.view = self.view, live
        self._pause(bool(lost))
        job_set, topic = self.node.job_set, self.node.settings.topic(SHARD_EVENTS)
        for n in lost:
            self.publisher.submit(topic, job_set, {"type": "NodeLost", "job_set": job_set, "node": n,
                                                   "incarnation": before[n][1]})
        for n in joined:
            address, incarnation = live[n]
            self.publisher.submit(topic, job_set, {"type": "NodeJoined", "job_set": job_set, "node": n,
                                                   "address": address, "incarnation": incarnation})
        log.info("%s: live set changed (+%s -%s): paused", self.node.node, joined, lost)

    def _pause(self, lost: bool) -> None:
        """Create `/shard` (under the lock, before anything is published)."""
        from kazoo.exceptions import NodeExistsError

        with contextlib.suppress(NodeExistsError):
            self.zk.create(self.layout.shard, b"", ephemeral=True)
        self.paused, self.matched_at = True, None
        self.lost_in_pause = self.lost_in_pause or lost

    def _matches(self, plan: dict[str, Any] | None) -> bool:
        live = {n: i for n, (_, i) in self.view.items()}
        return plan is not None and plan["released"] and plan["incarnations"] == live

    # -- lifting the pause (the loop) ------------------------------------------------------------------
    async def _maybe_lift(self) -> None:
        plan, term = self.plan, self.term  # read without the lock (see `lock`); `_lift` checks again under it
        if not self.paused or not self._matches(plan):
            self.matched_at = None
            return
        now = time.monotonic()
        if self.matched_at is None:
            self.matched_at = now
        if self.lost_in_pause and now - self.matched_at < self.node.grace:
            return
        assert plan is not None
        await asyncio.to_thread(self._lift, plan, term)

    def _lift(self, plan: dict[str, Any], term: int) -> None:
        from kazoo.exceptions import NoNodeError

        with self.lock:
            if term != self.term or not self.paused or self.matched_at is None or not self._matches(plan):
                return  # changed meanwhile: paused again
            written = {k: plan[k] for k in ("epoch", "strategy", "tasks", "nodes", "ranges")}
            self.zk.set(self.layout.live, json.dumps(written, sort_keys=True).encode())
            with contextlib.suppress(NoNodeError):
                self.zk.delete(self.layout.shard)
            self.paused, self.lost_in_pause, self.matched_at = False, False, None
        log.info("%s: epoch %d released; pause lifted", self.node.node, plan["epoch"])
