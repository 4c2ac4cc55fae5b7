"""An input record as the core sees it: bytes plus the coordinates that become an output's cause."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schemas.common import Cause

DEFAULT_POOL = "default"
UNREADABLE_KEY = "<unreadable-key>"


@dataclass(frozen=True, slots=True)
class SourceRecord:
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


def pool_of(record: SourceRecord) -> str:
    """The pool a record belongs to: its key, or `default` when it has none (SPEC §1)."""
    if not record.key:
        return DEFAULT_POOL
    try:
        return record.key.decode("utf-8")
    except UnicodeDecodeError:
        return UNREADABLE_KEY
