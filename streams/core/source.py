"""An input record as the core sees it: bytes plus the coordinates that become an output's cause."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from schemas.common import MAX_MILLIS, Cause

DEFAULT_POOL = "default"
UNREADABLE_KEY = "<unreadable-key>"
MAX_KEY_BYTES = 1024  # a key names a pool, group, namespace or job set: a longer one is bad input


class SourceRecord(NamedTuple):
    """One per input record, so a named tuple (see `streams.core.outputs`)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    def cause(self, position: int) -> Cause:
        return Cause(topic=self.topic, partition=self.partition, offset=self.offset, timestamp=self.timestamp,
                     position=position)


def cause_of(record: SourceRecord, position: int) -> dict[str, Any]:
    """An output's `cause`, as a mapping in `Cause`'s field order (the hot path)."""
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "position": position}


def event_time(record: SourceRecord) -> int:
    """When `record` happened, as every fold's clock takes it: its Kafka timestamp, within [0, `MAX_MILLIS`].

    The inputs of a fold that keeps a clock (`Fold.clocked`) are `message.timestamp.type=LogAppendTime` (unless
    the deployment's `record_time` is `producer`), so this is the broker's clock, whatever a producer's says: a
    producer an hour ahead cannot time jobs out or make a pool's apps stale early. The bound keeps what a fold
    adds to a time within 64 bits even for a record of a topic left at `CreateTime` by a producer that stamped
    it absurdly.
    """
    return min(max(record.timestamp, 0), MAX_MILLIS)


def record_key(record: SourceRecord) -> str:
    """What the record's own key says: its text, or `default` when it has none (SPEC §1); `UNREADABLE_KEY`
    when it is not UTF-8 or longer than `MAX_KEY_BYTES`.

    A fold's `key_of` may let the value decide instead (limits events name their group).
    """
    if not record.key:
        return DEFAULT_POOL
    if len(record.key) > MAX_KEY_BYTES:
        return UNREADABLE_KEY
    try:
        return record.key.decode("utf-8")
    except UnicodeDecodeError:
        return UNREADABLE_KEY


def named_key(record: SourceRecord, field: str) -> str | None:
    """The key a JSON object value names in `field`, if it is readable and names one.

    Cheap on purpose (one orjson parse, no validation): it only chooses where a record is folded;
    the fold validates the record there and dead-letters it with the reason if it is bad.
    """
    if not record.value:
        return None
    try:
        value = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        return None
    named = value.get(field) if isinstance(value, dict) else None
    return named if isinstance(named, str) and 0 < len(named.encode()) <= MAX_KEY_BYTES else None


def origin(record: SourceRecord) -> str:
    """Where a record came from, as redelivery is recognised: its (topic, partition), never its topic alone.

    A key's records can arrive on several partitions of one topic (keyless or foreign-partitioned
    producers, forwarded to the key's partition), and offsets only rise within a partition.
    """
    return f"{record.topic}:{record.partition}"

