"""The decider's client: what a business service or an actuator embeds, as `DispatcherClient` is the dispatcher's.

Writes are records acknowledged by the broker before the call returns: `report` (a load report in the seed's
envelope, on `plugin_decider`), `apply_policy` (`policies`), `observe` (`InstancesObserved`, on
`cluster-events`), each keyed by its pool. `run()` follows `scaling-decisions` (read_committed) and hands each
decision of the chosen pools to the `on_decision` callbacks, typed.

It starts from the pool's desired instances without replaying a single decision: it fixes its place in
`scaling-decisions` first, then reads the compacted `pool-instances` to its end (the fold writes it in the
decision's transaction, so it holds every decision before that place), then follows the decisions from the place
fixed. `desired(pool)` is therefore current from the moment `ready` is set, and only moves forward: a decision at
or below the seq it holds changes nothing (two readers can deliver one decision twice; a rebalance replays some).

In a consumer group (the default) offsets are committed after the callbacks returned, so a restarted client hands
a decision over again rather than never: callbacks are called at least once, and each decision at most once per
process (a seq at or below the last one handled for its pool is skipped). With `group_id=None` it reads every
partition itself and commits nothing: the actuator's way, whose replicas must each see every decision and need no
offsets (the desired state at start is `pool-instances`).

A record it cannot read (not JSON, not a `ScalingDecision`) is logged, counted (`unreadable`) and passed over.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.cluster import InstancesObserved
from schemas.decisions import ScalingDecision
from schemas.policy import DeciderPolicy, JusticePolicy, published
from streams import kafka, pool_sizes
from streams.clients import Writer, Written, envelope
from streams.core.pools import CLUSTER_EVENTS, PLUGIN_DECIDER, POLICIES, POOL_INSTANCES, SCALING_DECISIONS
from streams.errors import ConfigError
from streams.settings import Settings

log = logging.getLogger(__name__)

Callback = Callable[[ScalingDecision], Awaitable[None] | None]


@dataclass(frozen=True)
class Desired:
    """A pool's desired instances per app, as of decision `seq` (0: no decision read), and `at`, the broker time
    (ms) of the record that set them (0 if none)."""

    instances: Mapping[str, int] = field(default_factory=dict)
    seq: int = 0
    at: int = 0

    def after(self, decision: ScalingDecision, at: int) -> Desired:
        """These instances moved on by `decision`. A whole decision states every app: its instances, and 0 for
        apps it no longer lists. One of `form: changes` states what it changed (an app that left the policy at 0):
        these instances with its own over them."""
        base = self.instances if decision.form == "changes" else dict.fromkeys(self.instances, 0)
        return Desired({**base, **decision.instances}, decision.seq, at)


class DeciderClient(Writer):
    """`async with DeciderClient(settings, "pool-a") as client: await client.report("ats", 72)`.

    `group_id`: "" (the default) names the client's consumer group from its pools; None reads without a group.
    """

    def __init__(self, settings: Settings, *pools: str, group_id: str | None = "") -> None:
        if not pools:
            raise ConfigError("a DeciderClient needs at least one pool")
        self.settings, self.pools = settings, frozenset(pools)
        self.group_id = (f"{settings.app_id}-decider-client-{','.join(sorted(pools))}" if group_id == ""
                         else group_id)
        self.callbacks: list[Callback] = []
        self.unreadable = 0  # records of the decisions topic that were not a readable decision
        self._desired: dict[str, Desired] = {}
        self._handled: dict[str, int] = {}  # pool -> seq of the last decision handed to the callbacks
        self.changed = asyncio.Event()  # set whenever a pool's desired instances move (the actuator waits on it)

    # -- writing ---------------------------------------------------------------------------------
    def _pool(self, pool: str | None) -> str:
        if pool is None:
            if len(self.pools) != 1:
                raise ConfigError(f"name the pool: this client serves {sorted(self.pools)}")
            return next(iter(self.pools))
        return pool

    async def report(self, app: str, metrical: float, pool: str | None = None) -> Written:
        """App `app`'s load score, in the seed's envelope (the decider reads its pool from the key)."""
        return await self.write(PLUGIN_DECIDER, self._pool(pool), envelope(app, metrical, PLUGIN_DECIDER))

    async def apply_policy(self, policy: DeciderPolicy | JusticePolicy, pool: str | None = None) -> Written:
        """Put `policy` in force for the pool, from its next record on; `RecordTooLarge` if a record of the pool
        under it could pass the size Kafka takes (`streams.pool_sizes`), and nothing is written."""
        if isinstance(policy, DeciderPolicy):
            pool_sizes.check(policy)
        return await self.write(POLICIES, self._pool(pool), orjson.dumps(published(policy)))

    async def observe(self, app: str, instances: int, pool: str | None = None) -> Written:
        """Tell the decider that `instances` of `app` run (observations are true: its instances become these)."""
        return await self.observe_all({app: instances}, pool)

    async def observe_all(self, instances: Mapping[str, int], pool: str | None = None) -> Written:
        """`observe` for several apps of one pool, in one record."""
        name = self._pool(pool)
        event = InstancesObserved(pool=name, instances=dict(instances))
        return await self.write(CLUSTER_EVENTS, name, event.model_dump_json().encode())

    # -- following -------------------------------------------------------------------------------
    def on_decision(self, callback: Callback) -> None:
        """Hand each decision of this client's pools to `callback` (a `ScalingDecision`; sync or async)."""
        self.callbacks.append(callback)

    def desired(self, pool: str | None = None) -> Desired:
        """The pool's desired instances as this client knows them (empty before `ready`, or with no decision)."""
        return self._desired.get(self._pool(pool), Desired())

    def learn(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take the latest `PoolInstances` per app (records of `pool-instances`, in log order) as the desired state."""
        for value in records:
            pool, app = value.get("pool"), value.get("app")
            if pool not in self.pools or not isinstance(app, str):
                continue
            seq, count = value.get("seq"), value.get("instances")
            if not isinstance(seq, int) or not isinstance(count, int):
                continue
            known = self._desired.get(pool, Desired())
            self._desired[pool] = Desired({**known.instances, app: count}, max(known.seq, seq), known.at)
        self.changed.set()

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Follow the decisions until cancelled; `ready` is set once `desired` is current and the consumer holds
        its place (decisions written after that reach the callbacks)."""
        from aiokafka import TopicPartition

        from streams.clients import read_log

        topic = self.settings.topic(SCALING_DECISIONS)
        grouped = self.group_id is not None
        options: dict[str, Any] = {"auto_offset_reset": "latest"}
        if grouped:
            options["group_id"] = self.group_id
        consumer = kafka.consumer(self.settings.kafka_bootstrap, *((topic,) if grouped else ()), **options)
        await consumer.start()
        try:
            if grouped:
                while not consumer.assignment():
                    await consumer.getmany(timeout_ms=100)  # joins the group: nothing is delivered before
            else:
                await consumer._client.force_metadata_update()
                consumer.assign([TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())])
            for tp in consumer.assignment():
                await consumer.position(tp)  # the place is fixed now, before pool-instances is read
            instances = await read_log(self.settings.kafka_bootstrap, [self.settings.topic(POOL_INSTANCES)])
            self.learn(value for r in instances if (value := kafka.json_object(r)) is not None)
            if ready is not None:
                ready.set()
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for tp in sorted(batch, key=lambda tp: tp.partition):
                    for message in batch[tp]:
                        await self._deliver(message)
                if batch and grouped:
                    await consumer.commit()
        finally:
            await consumer.stop()

    async def _deliver(self, message: Any) -> None:
        if message.key is not None and message.key.decode("utf-8", "replace") not in self.pools:
            return  # another pool's: not read further
        value = kafka.json_object(message)
        decision = None if value is None else kafka.validated(message, value, ScalingDecision)
        if decision is None:
            self.unreadable += message.value is not None
            return
        if decision.pool not in self.pools:
            return
        known = self._desired.get(decision.pool, Desired())
        if decision.seq > known.seq:
            self._desired[decision.pool] = known.after(decision, message.timestamp)
            self.changed.set()
        if decision.seq <= self._handled.get(decision.pool, 0):
            return
        self._handled[decision.pool] = decision.seq
        for callback in self.callbacks:
            try:
                result = callback(decision)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # the tenant's code: one failing call must not stop the others
                log.exception("a decision callback failed on pool %s seq %d", decision.pool, decision.seq)

