"""What the console knows of the control plane: the output topics followed live, folded into a bounded view.

The console is no second source of truth: the worker's state pages answer for one key (`streams.clients.
worker_page`), and this feed follows what the worker writes, from where it stands: the compacted topics
whole (`pool-instances`, `dispatcher-health`, `group-health`, `rejection-limits`, `shard-plans`, `actuations`
as the latest per key), and of the others (decisions, starts, outcomes, dead letters) the last records of
each partition (`TAIL`), then everything new. Each record it reads is handed to the pages' subscribers as an
`Update` naming what changed (a pool, a namespace, a group, a job set, the dead letters), so a page is
pushed what concerns it and nothing else.

Memory is bounded by the number of keys, not the log: per pool the last `KEPT` decisions, per namespace the
last `KEPT` starts and outcomes (and the final failures of the last hour counted), per dead-letter topic and
reason a count and the last `KEPT` letters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streams import kafka
from streams.settings import Settings
from streams.topics import ACTUATIONS, catalogue

log = logging.getLogger(__name__)
TAIL = 2_000  # records of each partition of a topic that is not compacted, read back at start
KEPT = 200  # decisions a pool, starts and outcomes a namespace, letters a dead-letter topic and reason
HOUR_MS = 3_600_000

COMPACTED = ("pool-instances", "dispatcher-health", "group-health", "rejection-limits", "shard-plans", ACTUATIONS)
STREAMED = ("scaling-decisions", "justice-outcomes", "job-starts", "job-outcomes")


@dataclass(frozen=True)
class Update:
    """What a record changed: the kind of page (`pool`, `namespace`, `group`, `job_set`, `dlq`) and its key."""

    kind: str
    key: str
    record: dict[str, Any]


@dataclass
class View:
    """The latest of everything the feed read, by key."""

    instances: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> app -> decided instances
    actuations: dict[str, dict[str, Any]] = field(default_factory=dict)  # pool -> its last Actuation
    decisions: dict[str, deque[dict[str, Any]]] = field(default_factory=dict)  # pool -> last decisions
    health: dict[str, dict[str, Any]] = field(default_factory=dict)  # namespace -> DispatcherHealth
    jobs: dict[str, deque[dict[str, Any]]] = field(default_factory=dict)  # namespace -> last starts and outcomes
    failed: dict[str, deque[int]] = field(default_factory=dict)  # namespace -> times of its final failures
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> GroupHealth
    limits: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # group -> scheduler -> limit
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)  # job set -> ShardPlan
    letters: Counter[tuple[str, str]] = field(default_factory=Counter)  # (dlq topic, reason) -> count
    recent_letters: dict[tuple[str, str], deque[dict[str, Any]]] = field(default_factory=dict)

    def failed_last_hour(self, namespace: str, now_ms: int) -> int:
        return sum(1 for at in self.failed.get(namespace, ()) if at > now_ms - HOUR_MS)


def _kept() -> deque[dict[str, Any]]:
    return deque(maxlen=KEPT)


class Feed:
    """Follows the topics (`run`) into `view`, calling each subscriber with every `Update`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.view = View()
        self.subscribers: set[Callable[[Update], None]] = set()
        self.told = 0  # updates told so far: a page renders with it, so its stream can say what it missed
        self._last_told: dict[tuple[str, str | None], int] = {}  # (kind, key) and (kind, None) -> `told` then
        self.caught_up = asyncio.Event()  # set once the records there were at start are read
        self._logical = {settings.topic(name): name for name in (*COMPACTED, *STREAMED)}
        self._dlqs = {spec.name for spec in catalogue(settings) if spec.name.endswith(".dlq")}

    def subscribe(self, callback: Callable[[Update], None]) -> Callable[[], None]:
        self.subscribers.add(callback)
        return lambda: self.subscribers.discard(callback)

    async def run(self) -> None:
        """Read until cancelled; a broker that goes away is waited for."""
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001  (the broker lost, a topic not there yet: start again a little later)
                log.warning("the console's feed stopped (%s); reading again in 2 s", kafka.reason(e))
                await asyncio.sleep(2)

    async def _follow(self) -> None:
        from aiokafka import TopicPartition

        consumer = kafka.consumer(self.settings.kafka_bootstrap, auto_offset_reset="earliest",
                                  max_partition_fetch_bytes=4 << 20)
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()  # every topic's partitions (as clients.read_log does)
            topics = sorted(t for t in (*self._logical, *self._dlqs) if consumer.partitions_for_topic(t))
            tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            starts = await consumer.beginning_offsets(tps)
            for tp in tps:
                whole = self._logical.get(tp.topic) in COMPACTED
                consumer.seek(tp, starts[tp] if whole else max(starts[tp], ends[tp] - TAIL))
            behind = {tp for tp in tps if ends[tp] > starts[tp]}
            if not behind:
                self.caught_up.set()
            while True:
                batch = await consumer.getmany(timeout_ms=500, max_records=2_000)
                for tp, messages in batch.items():
                    for message in messages:
                        self._read(tp.topic, message)
                    if tp in behind and messages and messages[-1].offset + 1 >= ends[tp]:
                        behind.discard(tp)
                if behind and not self.caught_up.is_set():
                    behind = {tp for tp in behind if await consumer.position(tp) < ends[tp]}
                if not behind:
                    self.caught_up.set()
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()

    def _read(self, topic: str, message: Any) -> None:
        key = message.key.decode("utf-8", "replace") if message.key else ""
        value = kafka.object_of(message.value)
        if topic in self._dlqs:
            if value is None:
                return
            value = {**value, "dlq": topic, "offset": message.offset, "partition": message.partition,
                     "timestamp": message.timestamp}
            self._letter(topic, value)
            self._tell(Update("dlq", topic, value))
            return
        name = self._logical[topic]
        update = self._apply(name, key, value, message.timestamp)
        if update is not None:
            self._tell(update)

    def _apply(self, name: str, key: str, value: dict[str, Any] | None, timestamp: int) -> Update | None:
        v = self.view
        if name == "pool-instances":
            pool, _, app = key.rpartition("/")
            if value is None:
                v.instances.get(pool, {}).pop(app, None)
            else:
                v.instances.setdefault(pool, {})[app] = int(value.get("instances", 0))
            return Update("pool", pool, value or {})
        if value is None:
            return None
        if name == ACTUATIONS:
            v.actuations[key] = value
            return Update("pool", key, value)
        if name in ("scaling-decisions", "justice-outcomes"):
            pool = str(value.get("pool", key))
            v.decisions.setdefault(pool, _kept()).append(value)
            return Update("pool", pool, value)
        if name == "dispatcher-health":
            v.health[key] = value
            return Update("namespace", key, value)
        if name in ("job-starts", "job-outcomes"):
            namespace = str(value.get("namespace", key))
            if value.get("type") == "JobFailedFinally":
                v.failed.setdefault(namespace, deque(maxlen=10_000)).append(int(value.get("at") or timestamp))
            if value.get("type") != "JobsAccepted":
                v.jobs.setdefault(namespace, _kept()).append(value)
            return Update("namespace", namespace, value)
        if name == "group-health":
            v.groups[key] = value
            return Update("group", key, value)
        if name == "rejection-limits":
            group, _, scheduler = key.partition("/")
            v.limits.setdefault(group, {})[scheduler] = value
            return Update("group", group, value)
        if name == "shard-plans":
            v.plans[key] = value
            return Update("job_set", key, value)
        return None

    def _letter(self, topic: str, value: dict[str, Any]) -> None:
        reason = str(value.get("reason_code", "?"))
        self.view.letters[(topic, reason)] += 1
        self.view.recent_letters.setdefault((topic, reason), _kept()).append(value)

    def changed_since(self, kind: str, key: str | None, since: int) -> bool:
        """Whether an update of this kind (and key) was told after `since`: one told between a page's render and
        its stream's subscription would otherwise never reach that page."""
        if kind == "any":
            return self.told > since
        return self._last_told.get((kind, key), 0) > since

    def _tell(self, update: Update) -> None:
        self.told += 1
        self._last_told[(update.kind, update.key)] = self._last_told[(update.kind, None)] = self.told
        for callback in list(self.subscribers):
            try:
                callback(update)
            except Exception:  # a page that went away: the others still hear
                log.exception("a console subscriber failed")
