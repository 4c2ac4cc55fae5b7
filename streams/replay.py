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
import heapq
import multiprocessing
import zlib
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
        rows = self.derive(record)
        for row in rows:
            where = (row["topic"], row["partition"])
            row["offset"] = self._next_offset.get(where, 0)
            self._next_offset[where] = row["offset"] + 1
        return rows

    def derive(self, record: SourceRecord) -> list[dict[str, Any]]:
        """`record`'s output rows, without offsets (those number the outputs of all keys together)."""
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
            rows.append({"topic": topic, "partition": record.partition, "offset": 0,
                         "timestamp": record.timestamp, "key": emit.key, "value": emit.value_bytes()})
        return rows


def output_line(row: dict[str, Any]) -> bytes:
    """One output line (no newline); the decision's own canonical bytes are embedded unchanged."""
    head = orjson.dumps({k: row[k] for k in ("topic", "partition", "offset", "timestamp", "key")})
    return head[:-1] + b',"value":' + row["value"] + b"}"


def _record(number: int, line: bytes | str) -> SourceRecord:
    try:
        return record_of(orjson.loads(line))
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as e:
        raise ReplayInputError(f"line {number} is not a record line ({type(e).__name__}: {e})") from None


def replay_lines(lines: Iterable[bytes | str], replayer: Replayer | None = None) -> Iterator[bytes]:
    replayer = replayer or Replayer()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        for out in replayer.feed(_record(number, line)):
            yield output_line(out)


CHUNK = 10_000  # lines per round trip to the processes


def replay_lines_parallel(lines: Iterable[bytes], replayer: Replayer, jobs: int) -> Iterator[bytes]:
    """`replay_lines` on `jobs` processes: the same bytes, in the same order.

    Keys are independent (each record changes one pool's or one group's state), so this process
    reads the lines, sends each to the process that owns its key (by a hash of its scope), and
    merges what they derive back into input order, numbering output offsets as `feed` does.
    `replayer.counts` receives the processes' counts at the end.
    """
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pipes, procs = [], []
    for _ in range(jobs):
        ours, theirs = context.Pipe()
        proc = context.Process(target=_derive_shard, args=(theirs, replayer.topic_prefix), daemon=True)
        proc.start()
        theirs.close()
        pipes.append(ours)
        procs.append(proc)
    in_flight = 0
    try:
        chunk: list[list[tuple[int, bytes]]] = [[] for _ in range(jobs)]
        size = 0
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _record(number, line)
            routed = route(record.topic, replayer.topic_prefix)
            if routed is None:
                replayer.counts["skipped"] = replayer.counts.get("skipped", 0) + 1
                continue
            logical, fold = routed
            shard = zlib.crc32(f"{fold.name}/{fold.key_of(record, logical)}".encode()) % jobs
            chunk[shard].append((number, line))
            size += 1
            if size == CHUNK:
                for pipe, part in zip(pipes, chunk, strict=True):
                    pipe.send(part)
                in_flight += 1
                if in_flight == 2:  # keep the processes busy while this one reads the next chunk
                    yield from _merge(replayer, [pipe.recv() for pipe in pipes])
                    in_flight -= 1
                chunk, size = [[] for _ in range(jobs)], 0
        if size:
            for pipe, part in zip(pipes, chunk, strict=True):
                pipe.send(part)
            in_flight += 1
        while in_flight:
            yield from _merge(replayer, [pipe.recv() for pipe in pipes])
            in_flight -= 1
        for pipe in pipes:
            pipe.send(None)
        for pipe in pipes:
            for name, count in pipe.recv().items():
                replayer.counts[name] = replayer.counts.get(name, 0) + count
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()


def _merge(replayer: Replayer, parts: list[list[tuple[int, list[dict[str, Any]]]]]) -> Iterator[bytes]:
    """The processes' rows for one chunk, in input order, with offsets numbered as `Replayer.feed` does."""
    offsets = replayer._next_offset
    for _, rows in heapq.merge(*parts, key=lambda item: item[0]):
        for row in rows:
            where = (row["topic"], row["partition"])
            row["offset"] = offsets.get(where, 0)
            offsets[where] = row["offset"] + 1
            yield output_line(row)


def _derive_shard(pipe: Any, topic_prefix: str) -> None:
    """One process's share of a parallel replay: the keys sent to it, folded in the order received."""
    replayer = Replayer(topic_prefix=topic_prefix)
    while (part := pipe.recv()) is not None:
        out = []
        for number, line in part:
            rows = replayer.derive(_record(number, line))
            if rows:
                out.append((number, rows))
        pipe.send(out)
    pipe.send(replayer.counts)
