"""An input record as the core sees it: bytes plus the coordinates that become an output's cause."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.common import Cause

DEFAULT_POOL = "default"


@dataclass(frozen=True, slots=True)
class SourceRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def cause(self) -> Cause:
        return Cause(topic=self.topic, partition=self.partition, offset=self.offset,
                     timestamp=self.timestamp)
