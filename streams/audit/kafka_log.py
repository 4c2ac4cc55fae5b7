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
from functools import cached_property
from typing import Any

from streams.audit.order import Coordinates, Named, applied_order, chains_from, coordinates, named_cause
from streams.clients import read_log
from streams.core.folds import scope
from streams.core.outputs import SILENT_INPUTS
from streams.core.pools import POOL_INSTANCES
from streams.core.source import SourceRecord
from streams.errors import ConfigError
from streams.lines import Output
from streams.replay.parallel import derive_all
from streams.replay.replayer import Replayer
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

    def scope_of(self, record: SourceRecord) -> tuple[str, str]:
        return scope(record, self.prefix) or (record.topic, "")

    @cached_property
    def causes(self) -> dict[Stream, list[Named | None]]:
        """The cause each recorded output names, per stream in order (read once: ordering and the cut both ask)."""
        return {stream: [named_cause(r.value) for r in records] for stream, records in self.recorded.items()}

    def ordered(self) -> list[SourceRecord]:
        return applied_order(self.inputs, chains_from(self.causes.values(), self.inputs, self.scope_of), self.topics,
                             self.scope_of)

    def cut(self) -> Cut:
        """The inputs in applied order and the recorded outputs, both up to where the log read holds every input
        the worker had applied: what `--verify` compares while the worker runs.

        The inputs and the outputs are read as they stand at one moment, and a worker that is running has
        applied inputs it has not committed the answers to yet, and answered inputs appended after the moment.
        Every applied input is answered (an output naming its position, `silent-inputs` for one that wrote
        nothing), so a key's inputs are cut at the first position no input read holds: what comes after it
        was applied after something the log read lacks. Inputs not answered yet are left out too, and outputs of
        inputs the read lacks. (In a log an older worker wrote, an input that wrote nothing left no position: a
        key is compared up to its first such input.)
        """
        ordered = self.ordered()
        position: dict[Coordinates, int] = {}
        for causes in self.causes.values():
            for named in causes:
                if named is not None and named.position is not None:
                    position.setdefault(named.at, named.position)
        held: dict[tuple[str, str], set[int]] = {}
        scopes: dict[Coordinates, tuple[str, str]] = {}
        for record in self.inputs:
            at = coordinates(record)
            scopes[at] = self.scope_of(record)
            if at in position:
                held.setdefault(scopes[at], set()).add(position[at])
        limit = {s: next(p for p in range(1, len(got) + 2) if p not in got) for s, got in held.items()}

        def kept(at: Coordinates, p: int | None) -> bool:
            return p is not None and at in scopes and p < limit[scopes[at]]

        inputs = [r for r in ordered if kept(coordinates(r), position.get(coordinates(r)))]
        recorded = {}
        for stream, records in self.recorded.items():
            recorded[stream] = [r for r, c in zip(records, self.causes[stream], strict=True)
                                if c is None or kept(c.at, c.position)]  # one that names no input: compared, as ever
        return Cut(inputs, recorded, len(ordered) - len(inputs),
                   sum(map(len, self.recorded.values())) - sum(map(len, recorded.values())))


@dataclass(frozen=True)
class Cut:
    ordered: list[SourceRecord]
    recorded: dict[Stream, list[SourceRecord]]
    inputs_left: int = 0  # inputs read that are not compared: not answered yet, or applied after one not read
    outputs_left: int = 0  # recorded outputs not compared: of those inputs, or of inputs appended after the read

    def describe(self) -> str:
        if not self.inputs_left and not self.outputs_left:
            return ""
        return (f"; left out, as the log read does not hold them whole (the worker was running): "
                f"{self.inputs_left} input records and {self.outputs_left} output records")


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
    unrecorded = _unrecorded_topics(recorded, replayer.topic_prefix)
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
            if recorded is None or out.topic in unrecorded:
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


LATER_STREAMS = (SILENT_INPUTS, POOL_INSTANCES)  # outputs a worker wrote from some release on


def _unrecorded_topics(recorded: dict[Stream, list[SourceRecord]] | None, prefix: str) -> frozenset[str]:
    """Of `LATER_STREAMS`, the topics the log has no record of at all: a log written by a worker that did not write
    them yet, which verifies as it did without them; every other derived output is compared."""
    if recorded is None:
        return frozenset()
    held = {t for t, _ in recorded}
    return frozenset(prefix + s for s in LATER_STREAMS) - held


def _in_range_output(record: SourceRecord, in_range: Callable[[SourceRecord], bool]) -> bool:
    """Whether a recorded output's cause lies in the range (outputs that name none count)."""
    named = named_cause(record.value)
    return named is None or in_range(SourceRecord(*named.at, named.timestamp, None, None))
