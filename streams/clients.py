"""Producing and following records with aiokafka, for the CLI and the tests.

Followers read with isolation_level=read_committed, so they see exactly what downstream
consumers of tribunal's decisions see: nothing from an aborted or unfinished transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any, NamedTuple, TypeVar

from streams import kafka
from streams.errors import NotFound, TribunalError
from streams.settings import Settings

log = logging.getLogger(__name__)


class Written(NamedTuple):
    """Where a client's record was written: what its outputs' `cause` will name."""

    topic: str
    partition: int
    offset: int


class Writer:
    """What a client that writes shares: its idempotent producer (acks=all), started by `async with` and stopped
    after, and `write`, which returns once the broker has the record."""

    settings: Settings
    _producer: Any = None

    async def __aenter__(self: W) -> W:
        self._producer = kafka.producer(self.settings.kafka_bootstrap, acks="all", linger_ms=1)
        await self._producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._producer.stop()

    async def write(self, logical: str, key: str, value: bytes) -> Written:
        """`value` on the deployment's topic `logical`, keyed by `key`, acknowledged by the broker."""
        topic = self.settings.topic(logical)
        meta = await self._producer.send_and_wait(topic, value, key=key.encode())
        return Written(topic, meta.partition, meta.offset)

    async def write_soon(self, logical: str, key: str, value: bytes) -> None:
        """`write`, without waiting for the broker: in order with this client's other writes, a failure logged
        (for records a loop must not wait a round trip for, as the actuator's)."""
        delivery = await self._producer.send(self.settings.topic(logical), value, key=key.encode())
        delivery.add_done_callback(_logged)


W = TypeVar("W", bound=Writer)


def _logged(delivery: asyncio.Future[Any]) -> None:
    if not delivery.cancelled() and delivery.exception() is not None:
        log.warning("a record was not written: %s", delivery.exception())


class KafkaUnavailable(TribunalError):
    """The broker did not answer."""


def envelope(app: str, metrical: float, channel: str) -> bytes:
    """The seed's command envelope: Body is itself a JSON string."""
    body = json.dumps({"App": app, "Metrical": metrical}, separators=(",", ":"))
    return json.dumps({"Command": "app-metrical", "Channel": channel, "Body": body},
                      separators=(",", ":")).encode()


async def _produce(settings: Settings, topic: str, key: bytes | None, value: bytes) -> tuple[int, int]:
    from aiokafka.errors import KafkaError

    producer = kafka.producer(settings.kafka_bootstrap, request_timeout_ms=15000)
    try:
        await producer.start()
        meta = await producer.send_and_wait(topic, value, key=key)
        return meta.partition, meta.offset
    except KafkaError as e:
        raise KafkaUnavailable(f"cannot produce to {topic} at {settings.kafka_bootstrap}: {kafka.reason(e)}") from None
    finally:
        await producer.stop()


def produce(settings: Settings, topic: str, key: bytes | None, value: bytes) -> tuple[int, int]:
    return asyncio.run(_produce(settings, topic, key, value))


def follow(settings: Settings, topic: str, from_beginning: bool = False, max_records: int | None = None,
           idle_timeout: float | None = None) -> Iterator[dict[str, Any]]:
    """Yield a topic's records as replay-file rows, in order per partition."""
    from aiokafka.errors import KafkaError

    from streams.lines import export_row

    async def make() -> Any:
        return kafka.consumer(settings.kafka_bootstrap, topic,
                              auto_offset_reset="earliest" if from_beginning else "latest")

    loop = asyncio.new_event_loop()
    consumer = loop.run_until_complete(make())
    try:
        try:
            loop.run_until_complete(consumer.start())
        except KafkaError as e:
            raise KafkaUnavailable(f"cannot read {topic} at {settings.kafka_bootstrap}: {e}") from None
        seen = 0
        quiet_since = loop.time()
        while max_records is None or seen < max_records:
            batch = loop.run_until_complete(consumer.getmany(timeout_ms=500))
            if not batch:
                if idle_timeout is not None and loop.time() - quiet_since >= idle_timeout:
                    return
                continue
            quiet_since = loop.time()
            for tp in sorted(batch, key=lambda tp: tp.partition):
                for m in batch[tp]:
                    yield export_row(m.topic, m.partition, m.offset, m.timestamp, m.key, m.value)
                    seen += 1
                    if max_records is not None and seen >= max_records:
                        return
    finally:
        loop.run_until_complete(consumer.stop())
        loop.close()


async def read_log(bootstrap: str, topics: list[str], on_batch: Any = None) -> list[Any]:
    """Every committed record the topics hold now (read_committed, up to the last stable offsets).

    Returns `SourceRecord`s, each partition's in offset order; topics that do not exist yield
    nothing. `on_batch(n)` is called as records arrive, for progress bars.
    """
    from aiokafka import TopicPartition
    from aiokafka.errors import KafkaError

    from streams.core.source import SourceRecord

    # `earliest` as well as the seek below, so that no reset by the default policy (latest) can ever
    # make a partition read as empty (Kafka Connect's KafkaBasedLog guards the same way, KAFKA-7873).
    consumer = kafka.consumer(bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=8 << 20,
                              fetch_max_bytes=64 << 20)
    try:
        await consumer.start()
    except KafkaError as e:
        raise KafkaUnavailable(f"cannot read from {bootstrap}: {e}") from None
    records: list[Any] = []
    try:
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        if not tps:
            return records
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        waiting = {tp for tp in tps if ends[tp] > 0}
        while waiting:
            batch = await consumer.getmany(*waiting, timeout_ms=1000, max_records=50_000)
            for tp, messages in batch.items():
                records.extend(SourceRecord(m.topic, m.partition, m.offset, m.timestamp, m.key, m.value)
                               for m in messages if m.offset < ends[tp])
                if on_batch is not None:
                    on_batch(len(messages))
            waiting = {tp for tp in waiting if await consumer.position(tp) < ends[tp]}
    finally:
        await consumer.stop()
    return records


BUSY_FOR = 30.0  # seconds a state page may answer 503 (its worker rebalancing) before the CLI gives up


def worker_page(where: str, *path: str) -> Any:
    """The JSON a worker's web page `/path/.../` answers (any worker: it forwards to the key's owner)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    url = f"http://{where}/" + "".join(f"{urllib.parse.quote(p, safe='')}/" for p in path)
    deadline = time.monotonic() + BUSY_FOR
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            if e.code == 503 and time.monotonic() < deadline:  # rebalancing or recovering: soon answered
                time.sleep(0.5)
                continue
            kind = NotFound if e.code == 404 else TribunalError
            raise kind(f"{' '.join(path)}: the worker at {where} answered {e.code}") from None
        except (urllib.error.URLError, OSError) as e:
            raise TribunalError(f"no worker answers at {where}: {getattr(e, 'reason', e)}") from None
