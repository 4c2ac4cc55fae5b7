"""The log as Kafka holds it: every fold's inputs and its recorded outputs, replayed and compared.

Replay always folds from the first record of each input topic (a key's state depends on all of
its history); `--from`/`--to` only choose which inputs' outputs are written or compared. The
recorded outputs give the order the worker applied the inputs in (`streams.audit.order`), so a
replay from Kafka reproduces them byte for byte; the first output that differs is a divergence:
the recorded record, the derived one, and the input that caused it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from streams.audit.order import applied_order, chains_from
from streams.core.folds import scope
from streams.core.outputs import SILENT_INPUTS
from streams.core.source import SourceRecord
from streams.errors import ConfigError
from streams.io import read_log
from streams.replay import Output, Replayer, derive_all
from streams.settings import Settings
from streams.topics import input_topics, output_topics

Stream = tuple[str, str]  # output topic, key


@dataclass(frozen=True)
class Bound:
    """`--from`/`--to`: an offset (the same for every partition) or a time (ISO 8601, or epoch ms)."""

    offset: int | None = None
    time_ms: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> Bound | None:
        if text is None:
            return None
        if text.isdigit() and len(text) < 12:
            return cls(offset=int(text))
        if text.isdigit():
            return cls(time_ms=int(text))
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(f"{text!r} is neither an offset nor a time (e.g. 2026-11-22T14:02:00Z)") from None
        if when.tzinfo is None:
            raise ConfigError(f"{text!r}: give the time zone (e.g. a trailing Z for UTC)")
        return cls(time_ms=round(when.timestamp() * 1000))

    def before(self, record: SourceRecord) -> bool:
        return record.offset < self.offset if self.offset is not None else record.timestamp < (self.time_ms or 0)


def within(start: Bound | None, end: Bound | None) -> Callable[[SourceRecord], bool]:
    """Whether a record lies in [start, end)."""
    return lambda r: (start is None or not start.before(r)) and (end is None or end.before(r))


@dataclass
class KafkaLog:
    inputs: list[SourceRecord]
    recorded: dict[Stream, list[SourceRecord]]
    topics: list[str]
    prefix: str = ""

    @classmethod
    def read(cls, settings: Settings, on_batch: Any = None, topics: list[str] | None = None) -> KafkaLog:
        """The input topics (or `topics`) and, to order them as the worker applied them, the outputs."""
        topics = topics if topics is not None else input_topics(settings)
        wanted = set(topics)
        inputs: list[SourceRecord] = []
        recorded: dict[Stream, list[SourceRecord]] = {}
        everything = [*topics, *(t for t in output_topics(settings) if t not in wanted)]
        for record in asyncio.run(read_log(settings.kafka_bootstrap, everything, on_batch)):
            if record.topic in wanted:
                inputs.append(record)
            else:
                key = record.key.decode("utf-8", "replace") if record.key is not None else ""
                recorded.setdefault((record.topic, key), []).append(record)
        return cls(inputs, recorded, topics, settings.topic_prefix)

    def ordered(self) -> list[SourceRecord]:
        def scope_of(record: SourceRecord) -> tuple[str, str]:
            return scope(record, self.prefix) or (record.topic, "")

        streams = ([r.value for r in records] for records in self.recorded.values())
        return applied_order(self.inputs, chains_from(streams, self.inputs, scope_of), self.topics, scope_of)


@dataclass
class Divergence:
    stream: Stream
    index: int  # position in the stream (0-based); seq is index + 1 for tribunal's outputs
    recorded: SourceRecord | None
    derived: bytes | None
    cause: SourceRecord | None

    def describe(self) -> str:
        topic, key = self.stream
        lines = [f"divergence on {topic} key {key!r}, record #{self.index + 1} of that stream:"]
        if self.recorded is None:
            lines.append("  recorded: nothing (the worker wrote no such record)")
        else:
            lines.append(f"  recorded ({topic}[{self.recorded.partition}]@{self.recorded.offset}): "
                         f"{(self.recorded.value or b'').decode('utf-8', 'replace')}")
        derived = self.derived.decode() if self.derived is not None else "nothing (replay derives no such record)"
        lines.append(f"  derived:  {derived}")
        if self.cause is not None:
            lines.append(f"  input ({self.cause.topic}[{self.cause.partition}]@{self.cause.offset}): "
                         f"{(self.cause.value or b'').decode('utf-8', 'replace')}")
        return "\n".join(lines)


@dataclass
class Verification:
    agreed: int = 0
    compared_inputs: int = 0
    divergence: Divergence | None = None
    positions: dict[Stream, int] = field(default_factory=dict)


def replay_log(ordered: list[SourceRecord], replayer: Replayer, in_range: Callable[[SourceRecord], bool],
               recorded: dict[Stream, list[SourceRecord]] | None = None, on_input: Any = None,
               sink: Callable[[Output], None] | None = None, jobs: int = 1) -> Verification:
    """Fold `ordered` inputs (on `jobs` processes); write in-range outputs to `sink`, and compare them with
    `recorded` if given."""
    result = Verification()
    positions = result.positions
    unrecorded = _unrecorded_silent_topic(recorded, replayer.topic_prefix)
    for record, outputs in derive_all(ordered, replayer, jobs):
        if on_input is not None:
            on_input(1)
        counted = in_range(record)
        result.compared_inputs += counted
        for out in outputs:
            stream = (out.topic, out.key)
            at = positions.get(stream, 0)
            positions[stream] = at + 1
            if not counted:
                continue
            if sink is not None:
                sink(out)
            if recorded is None or out.topic == unrecorded:
                continue
            mine = recorded.get(stream, [])
            theirs = mine[at] if at < len(mine) else None
            if theirs is None or theirs.value != out.value:
                result.divergence = Divergence(stream, at, theirs, out.value, record)
                return result
            result.agreed += 1
    if recorded is not None:
        for stream, records in sorted(recorded.items()):
            start = positions.get(stream, 0)
            for index in range(start, len(records)):
                if _in_range_output(records[index], in_range):
                    result.divergence = Divergence(stream, index, records[index], None, None)
                    return result
    return result


def _unrecorded_silent_topic(recorded: dict[Stream, list[SourceRecord]] | None, prefix: str) -> str | None:
    """`silent-inputs`, if the log has no record of it at all: a log written by a worker that did not write
    them yet, which verifies as it did; None otherwise: then every derived `SilentInput` is compared."""
    topic = prefix + SILENT_INPUTS
    return None if recorded is None or any(t == topic for t, _ in recorded) else topic


def _in_range_output(record: SourceRecord, in_range: Callable[[SourceRecord], bool]) -> bool:
    """Whether a recorded output's cause lies in the range (outputs that name none count)."""
    try:
        cause = orjson.loads(record.value or b"null")["cause"]
        source = SourceRecord(cause["topic"], int(cause["partition"]), int(cause["offset"]),
                              int(cause["timestamp"]), None, None)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return True
    return in_range(source)
