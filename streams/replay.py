"""File replay: an exported log (JSON lines) through the same pure fold the agents run.

Input lines: `{"topic", "partition", "offset", "timestamp", "key", "value"}`; `value` is the
record's JSON value, or `value_b64` carries its exact bytes (what `tribunal tail --json` writes
when the bytes are not compact JSON, e.g. a malformed record). A null key is pool `default`.
Records are applied in file order; lines of topics tribunal does not read (an export of its own
outputs, say) are skipped and counted.

Each record goes to the fold that reads its topic (`streams.core.folds`): pools (decider,
justice) or scheduler groups (rejection limits). Output lines have the same shape: the fold's
output topic or the input topic + `.dlq`; key = pool, group or group/scheduler; partition and
timestamp of the cause; offset = the line's position among the outputs of that topic and
partition (a replay has no broker to assign offsets).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams.core.deadletter import dlq_topic
from streams.core.folds import route
from streams.core.outputs import DLQ
from streams.core.source import SourceRecord
from streams.errors import ConfigError


class ReplayInputError(ConfigError):
    """A line of the replay file is not a record line."""


def encode_value(value: Any) -> bytes:
    """Compact JSON, as the seed's Go producers and tribunal itself write records."""
    return orjson.dumps(value)


def export_row(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
               value: bytes | None) -> dict[str, Any]:
    """A record as a replay-file line: readable `value`, plus `value_b64` unless it re-encodes exactly."""
    row: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
                           "key": None if key is None else key.decode("utf-8", "replace"), "value": None}
    if value is not None:
        try:
            row["value"] = orjson.loads(value)
            exact = encode_value(row["value"]) == value
        except ValueError:
            row["value"], exact = value.decode("utf-8", "replace"), False
        if not exact:
            row["value_b64"] = base64.b64encode(value).decode("ascii")
    return row


def record_of(row: dict[str, Any]) -> SourceRecord:
    """The source record a file line describes (exact bytes from `value_b64` when present)."""
    if "value_b64" in row:
        value: bytes | None = base64.b64decode(row["value_b64"])
    else:
        value = None if row.get("value") is None else encode_value(row["value"])
    key = row.get("key")
    return SourceRecord(topic=str(row["topic"]), partition=int(row.get("partition", 0)), offset=int(row["offset"]),
                        timestamp=int(row.get("timestamp", 0)),
                        key=None if key is None else str(key).encode("utf-8"), value=value)


@dataclass
class Replayer:
    """Folds records of any pool or group; keeps every key's state in memory."""

    topic_prefix: str = ""
    states: dict[tuple[str, str], Any] = field(default_factory=dict)  # (fold, key) -> state
    counts: dict[str, int] = field(default_factory=dict)
    _next_offset: dict[tuple[str, int], int] = field(default_factory=dict)

    def feed(self, record: SourceRecord) -> list[dict[str, Any]]:
        routed = route(record.topic, self.topic_prefix)
        if routed is None:
            self.counts["skipped"] = self.counts.get("skipped", 0) + 1
            return []
        logical, fold = routed
        slot = (fold.name, fold.key_of(record, logical))
        previous = self.states.get(slot)
        state, outputs = fold.apply(fold.empty() if previous is None else previous, record, logical)
        self.states[slot] = state
        self.counts["records"] = self.counts.get("records", 0) + 1
        rows = []
        for emit in outputs:
            topic = dlq_topic(record.topic) if emit.stream == DLQ else self.topic_prefix + emit.stream
            self.counts[emit.stream] = self.counts.get(emit.stream, 0) + 1
            where = (topic, record.partition)
            offset = self._next_offset.get(where, 0)
            self._next_offset[where] = offset + 1
            rows.append({"topic": topic, "partition": record.partition, "offset": offset,
                         "timestamp": record.timestamp, "key": emit.key, "value": emit.value_bytes()})
        return rows


def output_line(row: dict[str, Any]) -> bytes:
    """One output line (no newline); the decision's own canonical bytes are embedded unchanged."""
    head = orjson.dumps({k: row[k] for k in ("topic", "partition", "offset", "timestamp", "key")})
    return head[:-1] + b',"value":' + row["value"] + b"}"


def replay_lines(lines: Iterable[bytes | str], replayer: Replayer | None = None) -> Iterator[bytes]:
    replayer = replayer or Replayer()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
            record = record_of(row)
        except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as e:
            raise ReplayInputError(f"line {number} is not a record line ({type(e).__name__}: {e})") from None
        for out in replayer.feed(record):
            yield output_line(out)
