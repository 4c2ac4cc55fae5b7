"""`tribunal dispatch ticker`: the dispatcher's clock, written to the log as `Tick` records.

The dispatcher's fold never reads a clock (replay must start every job at the same `now`), so a
ticker writes the time: every `interval` (100 ms by default) one `Tick {namespace, now}` per
namespace with jobs pending or running, keyed by namespace so that it lands on the partition the
namespace's state lives in. The namespaces come from the compacted `dispatcher-health` topic (the
fold writes a namespace's health after assigns, cap changes and ticks) plus any named with
`--namespace`. One ticker ticks at a time (kazoo's Election among the replicas); a second one
would do no harm (a Tick at or before a namespace's `now` changes nothing), it would only double
the records.

With `--pool`, it also ticks decider pools whose policy measures time (stale reports): a `Tick {pool, now}`
on `cluster-events` every `pool_interval`, so an app that stops reporting goes stale even while nothing else
in its pool happens.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams import kafka
from streams.core.dispatch import DISPATCHER_HEALTH, TICKS
from streams.core.pools import CLUSTER_EVENTS
from streams.settings import Settings
from streams.zk.election import Candidacy, session
from streams.zk.layout import Layout

log = logging.getLogger(__name__)


def tick(field: str, key: str, now_ms: int) -> bytes:
    """A `Tick` for a dispatcher namespace (`field` "namespace") or a decider pool ("pool")."""
    return orjson.dumps({"type": "Tick", field: key, "now": now_ms})


@dataclass
class Ticker:
    settings: Settings
    interval: float = 0.1
    layout: Layout = field(default_factory=Layout)
    session_timeout: float = 6.0
    always: frozenset[str] = frozenset()  # namespaces ticked whether or not they have work
    pools: frozenset[str] = frozenset()  # decider pools ticked on cluster-events
    pool_interval: float = 1.0
    active: dict[str, bool] = field(default_factory=dict)  # namespace -> has jobs pending or running
    leading: threading.Event = field(default_factory=threading.Event)
    candidacy: Candidacy = field(default_factory=Candidacy)

    def namespaces(self) -> list[str]:
        return sorted(self.always | {ns for ns, busy in self.active.items() if busy})

    def learn(self, healths: Iterable[dict[str, Any]]) -> None:
        """Which namespaces have work, from their latest health records."""
        for health in healths:
            self.active[health["namespace"]] = bool(health.get("pending") or health.get("running"))

    # -- leadership (a thread of asyncio's pool) ---------------------------------------------------------------
    def _lead(self) -> None:
        log.info("elected: ticking every %.0f ms", self.interval * 1000)
        self.candidacy.follow(self.leading, "ticking")
        log.info("no longer ticking")

    # -- the loops (asyncio) -----------------------------------------------------------------------
    async def _follow_health(self) -> None:
        consumer = kafka.consumer(self.settings.kafka_bootstrap, self.settings.topic(DISPATCHER_HEALTH),
                                  auto_offset_reset="earliest")
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                read = (kafka.json_object(m) for records in batch.values() for m in records)
                self.learn(h for h in read if h is not None and isinstance(h.get("namespace"), str))
        finally:
            await consumer.stop()

    async def _tick(self) -> None:
        producer = kafka.producer(self.settings.kafka_bootstrap, linger_ms=2, acks="all")
        await producer.start()
        topic, pool_topic = self.settings.topic(TICKS), self.settings.topic(CLUSTER_EVENTS)
        loop = asyncio.get_running_loop()
        try:
            due = pools_due = loop.time()
            while not self.stopping.is_set():
                if self.leading.is_set():
                    now = int(time.time() * 1000)
                    sent = [await producer.send(topic, tick("namespace", ns, now), key=ns.encode())
                            for ns in self.namespaces()]
                    if self.pools and loop.time() >= pools_due:
                        sent += [await producer.send(pool_topic, tick("pool", p, now), key=p.encode())
                                 for p in sorted(self.pools)]
                        pools_due = max(pools_due + self.pool_interval, loop.time())
                    await asyncio.gather(*sent)
                due = max(due + self.interval, loop.time())  # behind: tick now, not in a burst
                await asyncio.sleep(due - loop.time())
        finally:
            await producer.stop()

    @property
    def stopping(self) -> threading.Event:
        return self.candidacy.stopping

    async def run(self) -> None:
        async with session(self.settings.zookeeper_hosts, self.session_timeout, self.candidacy.on_state) as zk:
            tasks = [asyncio.create_task(self._follow_health()), asyncio.create_task(self._tick()),
                     asyncio.create_task(self.candidacy.stand(zk, self.layout.ticker_election, self._lead))]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a loop that failed (the broker unreachable): the ticker stops with its error
            finally:
                self.stop()
                await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        self.candidacy.stop()
