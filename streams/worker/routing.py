"""Bringing every record to the one partition where its key's state lives.

A key's state (a pool's, a group's) lives in the partition its key maps to under Kafka's default
partitioner (murmur2 of the key, as the Java client, aiokafka and `tribunal` itself produce). Not
every producer does that: the seed's business services publish without a key, librdkafka (kcat,
Go and C clients) hashes keys with CRC32, and a limits event names its group in the value. So
the worker computes each record's key with the fold's `key_of` and, when the record arrived on
another partition, forwards it to the fold's repartition topic, on the key's partition, and folds
it there: what Kafka Streams does for `groupByKey` after a key change.

The forward is sent through the transactional producer of the partition the record arrived on,
in the transaction that commits that partition's offset, so it is written exactly once. The
forwarded record carries the original's value unchanged, the routed key as its key, the
original's timestamp, and two headers: where it came from (`tribunal.origin`, `topic:partition:
offset:timestamp`, the timestamp too in case the broker stamps the forward with its own append
time) and its original key (`tribunal.key`, absent for a keyless record). The fold then sees
the original record, coordinates and all, so an output's cause names the input a producer wrote,
redelivery is recognised per original (topic, partition), and replay, which folds the input
topics directly, derives the same bytes. Records already on their key's partition take no extra hop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams.core.source import SourceRecord

ORIGIN = "tribunal.origin"
ORIGINAL_KEY = "tribunal.key"


@dataclass(frozen=True, slots=True)
class Send:
    """One record to produce inside a transaction."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: list[tuple[str, bytes]] | None = None
    timestamp_ms: int | None = None


def forward(record: SourceRecord, key: str, topic: str, partition: int) -> Send:
    """The repartition record that carries `record` to `key`'s partition."""
    headers = [(ORIGIN, f"{record.topic}:{record.partition}:{record.offset}:{record.timestamp}".encode())]
    if record.key is not None:
        headers.append((ORIGINAL_KEY, record.key))
    return Send(topic, key.encode("utf-8"), record.value, partition, headers, record.timestamp or None)


class NotForwarded(ValueError):
    """A record on a repartition topic that tribunal did not write there (no origin header)."""


def original(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
             headers: Any) -> SourceRecord:
    """The input record a repartition record carries, as it was on its own topic."""
    found = dict(headers or ())
    try:
        where = found.get(ORIGIN, b"")  # absent: no four fields, the same refusal as an unreadable one
        origin_topic, origin_partition, origin_offset, timestamp = where.decode().rsplit(":", 3)
        return SourceRecord(origin_topic, int(origin_partition), int(origin_offset), int(timestamp),
                            found.get(ORIGINAL_KEY), value)
    except (UnicodeDecodeError, ValueError):
        raise NotForwarded(f"{topic}[{partition}]@{offset} has no readable {ORIGIN} header") from None
