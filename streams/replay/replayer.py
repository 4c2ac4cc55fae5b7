"""The replayer: input records through the same pure folds the worker's agents run, every key's state in memory.

Each record goes to the fold that reads its topic (`streams.core.folds`). Its outputs have the shape of the
worker's: the fold's output topic or the input topic + `.dlq`; key = the fold's key; partition and timestamp of
the cause; offset = the output's position among the outputs of that topic and partition (a replay has no broker
to assign offsets).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from streams.core.folds import route
from streams.core.outputs import Emit, topic_of
from streams.core.source import SourceRecord
from streams.lines import Output, line_head, line_tail

Derived = tuple[str, int, int, str, bytes]  # an output before it is numbered: Output without its offset


@dataclass
class Replayer:
    """Folds records of any pool or group; keeps every key's state in memory."""

    topic_prefix: str = ""
    states: dict[tuple[str, str], Any] = field(default_factory=dict)  # (fold, key) -> state
    counts: dict[str, int] = field(default_factory=dict)
    _next_offset: dict[tuple[str, int], int] = field(default_factory=dict)

    def feed(self, record: SourceRecord) -> list[Output]:
        return self.number(self.derive(record))

    def number(self, derived: Iterable[Derived]) -> list[Output]:
        """`derived` outputs with their offsets: their place among the outputs of their topic and partition."""
        offsets = self._next_offset
        numbered = []
        for topic, partition, timestamp, key, value in derived:
            where = (topic, partition)
            offset = offsets.get(where, 0)
            offsets[where] = offset + 1
            numbered.append(Output(topic, partition, offset, timestamp, key, value))
        return numbered

    def derive(self, record: SourceRecord) -> list[Derived]:
        """`record`'s outputs, without offsets (those number the outputs of all keys together)."""
        outputs = self._step(record)
        derived = []
        for emit in outputs:
            topic = topic_of(emit.stream, record.topic, self.topic_prefix)
            derived.append((topic, record.partition, record.timestamp, emit.key, emit.value_bytes()))
        return derived

    def encode(self, record: SourceRecord, heads: list[bytes], tails: list[bytes]) -> int:
        """`derive`, as output lines less their offsets: appends each output's `line_head` and `line_tail`
        and answers how many (a replay writes lines, so it encodes each output once, where it is folded)."""
        outputs = self._step(record)
        partition, timestamp, prefix = record.partition, record.timestamp, self.topic_prefix
        for emit in outputs:
            heads.append(line_head(topic_of(emit.stream, record.topic, prefix), partition))
            tails.append(line_tail(timestamp, emit.key, emit.value_bytes()))
        return len(outputs)

    def _step(self, record: SourceRecord) -> list[Emit]:
        """`record` folded into its key's state, counted: its outputs (none for a topic no fold reads)."""
        routed = route(record.topic, self.topic_prefix)
        counts = self.counts
        if routed is None:
            counts["skipped"] = counts.get("skipped", 0) + 1
            return []
        logical, fold = routed
        slot = (fold.name, fold.key_of(record, logical))
        states = self.states
        previous = states.get(slot)
        state, outputs = fold.step(fold.empty() if previous is None else previous, record, logical)
        states[slot] = state
        counts["records"] = counts.get("records", 0) + 1
        for emit in outputs:
            counts[emit.stream] = counts.get(emit.stream, 0) + 1
        return outputs
