"""The export-line format: one input record a JSON line (`tribunal export` writes them, `replay`, `what-if`
and the tests read them).

A line is `{"topic", "partition", "offset", "timestamp", "key", "value"}`: `value` is the record's JSON
value, or `value_b64` carries its exact bytes (a value that is not compact JSON, e.g. a malformed record),
and `key_b64` a key that is not UTF-8. A null key is pool `default`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from streams.core.source import SourceRecord
from streams.errors import ConfigError


class ReplayInputError(ConfigError):
    """A line of the replay file is not a record line."""


def encode_value(value: Any) -> bytes:
    """Compact JSON, as the seed's Go producers and tribunal itself write records."""
    return orjson.dumps(value)


def export_row(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
               value: bytes | None) -> dict[str, Any]:
    """A record as a replay-file line: readable `key` and `value`, plus `key_b64` / `value_b64` unless they
    re-encode exactly."""
    row: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
                           "key": None if key is None else key.decode("utf-8", "replace"), "value": None}
    if key is not None and row["key"].encode("utf-8") != key:
        row["key_b64"] = base64.b64encode(key).decode("ascii")  # not UTF-8: the text alone would change it
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
    """The source record a file line describes (exact bytes from `key_b64` / `value_b64` when present)."""
    if "value_b64" in row:
        value: bytes | None = base64.b64decode(row["value_b64"])
    else:
        value = None if row.get("value") is None else encode_value(row["value"])
    if "key_b64" in row:
        key: bytes | None = base64.b64decode(row["key_b64"])
    else:
        key = None if row.get("key") is None else str(row["key"]).encode("utf-8")
    return SourceRecord(topic=str(row["topic"]), partition=int(row.get("partition", 0)), offset=int(row["offset"]),
                        timestamp=int(row.get("timestamp", 0)), key=key, value=value)


def _record(number: int, line: bytes | str) -> SourceRecord:
    try:
        return record_of(orjson.loads(line))
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as e:
        raise ReplayInputError(f"line {number} is not a record line ({type(e).__name__}: {e})") from None


def records_of(lines: Iterable[bytes | str]) -> Iterator[SourceRecord]:
    """The source records of a replay file's lines (blank lines skipped)."""
    for number, line in enumerate(lines, 1):
        if line.strip():
            yield _record(number, line)
