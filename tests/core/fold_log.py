"""An in-memory log of one key, folded record by record through a fold's `apply` as its agent would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from streams.core.outputs import Emit
from streams.core.source import SourceRecord

S = TypeVar("S")
FIRST_TIMESTAMP = 1_732_200_000_000


class FoldLog(Generic[S]):
    def __init__(self, key: str, state: S, apply: Callable[[S, SourceRecord, str], tuple[S, list[Emit]]]) -> None:
        self.key, self.state, self._apply = key, state, apply
        self.offsets: dict[str, int] = {}
        self.emitted: list[Emit] = []

    def raw(self, topic: str, value: bytes, key: bytes | None = None, at: int | None = None) -> list[Emit]:
        """Fold `value` as the next record of `topic` (keyed by this log's key unless `key` is given; stamped
        `at`, else a millisecond after the previous record of the topic)."""
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        record = SourceRecord(topic, 0, offset, FIRST_TIMESTAMP + offset if at is None else at,
                              self.key.encode() if key is None else key, value)
        self.state, outputs = self._apply(self.state, record, topic)
        self.emitted.extend(outputs)
        return outputs

    def records(self, stream: str) -> list[dict[str, Any]]:
        return [dict(e.record) if isinstance(e.record, dict) else e.record.model_dump() for e in self.emitted
                if e.stream == stream]
