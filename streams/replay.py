"""File replay: an exported log (JSON lines, `streams.lines`) through the same pure fold the agents run.

Records are applied in file order; lines of topics tribunal does not read (an export of its own
outputs, say) are skipped and counted.

Each record goes to the fold that reads its topic (`streams.core.folds`): pools (decider,
justice) or scheduler groups (rejection limits). Output lines have the same shape: the fold's
output topic or the input topic + `.dlq`; key = pool, group or group/scheduler; partition and
timestamp of the cause; offset = the line's position among the outputs of that topic and
partition (a replay has no broker to assign offsets).
"""

from __future__ import annotations

import multiprocessing
import queue
import zlib
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, BinaryIO, NamedTuple

import orjson

from streams.core.folds import route
from streams.core.outputs import topic_of
from streams.core.source import SourceRecord
from streams.lines import ReplayInputError, records_of


class Output(NamedTuple):
    """A derived output record. `offset`: its place among the outputs of its topic and partition so far
    (a replay has no broker to assign one)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str
    value: bytes


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
        routed = route(record.topic, self.topic_prefix)
        counts = self.counts
        if routed is None:
            counts["skipped"] = counts.get("skipped", 0) + 1
            return []
        logical, fold = routed
        slot = (fold.name, fold.key_of(record, logical))
        previous = self.states.get(slot)
        state, outputs = fold.step(fold.empty() if previous is None else previous, record, logical)
        self.states[slot] = state
        counts["records"] = counts.get("records", 0) + 1
        derived = []
        for emit in outputs:
            topic = topic_of(emit.stream, record.topic, self.topic_prefix)
            counts[emit.stream] = counts.get(emit.stream, 0) + 1
            derived.append((topic, record.partition, record.timestamp, emit.key, emit.value_bytes()))
        return derived


def output_line(out: Output) -> bytes:
    """One output line (no newline); the record's own canonical bytes are embedded unchanged."""
    return b'{"topic":%s,"partition":%d,"offset":%d,"timestamp":%d,"key":%s,"value":%s}' % (
        _json_text(out.topic), out.partition, out.offset, out.timestamp, _json_text(out.key), out.value)


@lru_cache(maxsize=1 << 14)
def _json_text(text: str) -> bytes:
    """A topic or key as JSON (there are few of them, and every output line names two)."""
    return orjson.dumps(text)


class LineWriter:
    """Writes lines in large blocks on a thread of its own: the write itself runs without the GIL,
    beside the merge (a million decisions are close to a gigabyte)."""

    BLOCK = 2_000  # lines per write
    AHEAD = 4  # blocks queued before the writer waits for the oldest

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._lines: list[bytes] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-writer")
        self._queued: deque[Future[int]] = deque()

    def write(self, line: bytes) -> None:
        self._lines.append(line)
        if len(self._lines) >= self.BLOCK:
            self._hand_over()

    def _hand_over(self) -> None:
        if self._lines:
            lines, self._lines = self._lines, []
            lines.append(b"")
            self._queued.append(self._pool.submit(self._sink.write, b"\n".join(lines)))
        while len(self._queued) > self.AHEAD:
            self._queued.popleft().result()

    def close(self) -> None:
        """Write what is left and wait for it; the sink stays open (its owner closes it)."""
        self._hand_over()
        while self._queued:
            self._queued.popleft().result()
        self._pool.shutdown()
        self._sink.flush()

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def replay_lines(lines: Iterable[bytes | str], replayer: Replayer | None = None, jobs: int = 1) -> Iterator[bytes]:
    """The output lines derived from a replay file's lines, on `jobs` processes (the same bytes whatever `jobs`)."""
    replayer = replayer or Replayer()
    for _, outputs in derive_all(records_of(lines), replayer, jobs):
        for out in outputs:
            yield output_line(out)


CHUNK = 5_000  # records per round trip to the processes
AHEAD = 3  # chunks handed out before the oldest one's results are awaited


def derive_all(records: Iterable[SourceRecord], replayer: Replayer, jobs: int = 1,
               chunk_size: int = CHUNK) -> Iterator[tuple[SourceRecord, list[Output]]]:
    """Each record with the outputs `replayer.feed` derives for it, in input order, folded on `jobs` processes.

    Keys are independent (a record changes one pool's or one group's state), so with `jobs > 1`
    each record goes to the process that owns its scope (a hash of fold and key), which folds its
    keys in input order; this process merges their outputs back into input order and numbers output
    offsets as `feed` does, so the bytes are the same as on one process. Queues, not pipes: a
    queue's put never blocks on a reader that is itself blocked writing (a pipe deadlocks there).
    `replayer.counts` receives the processes' counts at the end.
    """
    if jobs <= 1:
        for record in records:
            yield record, replayer.feed(record)
        return
    context = (multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods()
               else multiprocessing.get_context("spawn"))
    inboxes = [context.Queue() for _ in range(jobs)]
    outboxes = [context.Queue() for _ in range(jobs)]
    procs = [context.Process(target=_derive_shard, args=(inbox, outbox, replayer.topic_prefix), daemon=True)
             for inbox, outbox in zip(inboxes, outboxes, strict=True)]
    for proc in procs:
        proc.start()
    handed: list[tuple[list[SourceRecord], list[int]]] = []  # chunks and their shards, results not yet merged
    finished = False

    def merge_oldest() -> Iterator[tuple[SourceRecord, list[Output]]]:
        chunk, shards = handed.pop(0)
        results = [_get(outbox, proc) for outbox, proc in zip(outboxes, procs, strict=True)]
        return _merge(replayer, chunk, shards, results)

    try:
        for chunk in _chunks(records, chunk_size):
            shards = [_shard(record, replayer.topic_prefix, jobs) for record in chunk]
            parts: list[list[tuple[Any, ...]]] = [[] for _ in range(jobs)]
            for r, shard in zip(chunk, shards, strict=True):  # plain tuples: they cross a process boundary cheaply
                parts[shard].append((r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
            for inbox, part in zip(inboxes, parts, strict=True):
                inbox.put(part)
            handed.append((chunk, shards))
            if len(handed) == AHEAD:
                yield from merge_oldest()
        while handed:
            yield from merge_oldest()
        for inbox in inboxes:
            inbox.put(None)
        for outbox, proc in zip(outboxes, procs, strict=True):
            for name, count in _get(outbox, proc).items():
                replayer.counts[name] = replayer.counts.get(name, 0) + count
        finished = True
    finally:
        for proc in procs:
            if finished:
                proc.join(timeout=10)
            if proc.is_alive():  # stopped early (a bad line, the reader gone): the processes wait on their inbox
                proc.kill()
            proc.join()


def _chunks(records: Iterable[SourceRecord], size: int) -> Iterator[list[SourceRecord]]:
    chunk: list[SourceRecord] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _shard(record: SourceRecord, prefix: str, jobs: int) -> int:
    """The process that folds `record`'s scope (records of topics no fold reads: the first)."""
    routed = route(record.topic, prefix)
    if routed is None:
        return 0
    logical, fold = routed
    return zlib.crc32(f"{fold.name}/{fold.key_of(record, logical)}".encode()) % jobs


def _get(outbox: Any, proc: Any) -> Any:
    """The next result of a process; an error if it died (rather than waiting for ever)."""
    while True:
        try:
            return outbox.get(timeout=5)
        except queue.Empty:
            if not proc.is_alive():
                raise ReplayInputError(f"a replay process exited with code {proc.exitcode}") from None


def _merge(replayer: Replayer, chunk: list[SourceRecord], shards: list[int],
           parts: list[Shipped]) -> Iterator[tuple[SourceRecord, list[Output]]]:
    """One chunk's outputs from every process, back in input order, numbered as `Replayer.feed` does."""
    cursors = [_unpacked(part) for part in parts]
    number = replayer.number
    for record, shard in zip(chunk, shards, strict=True):
        partition, timestamp = record.partition, record.timestamp
        yield record, number([(topic, partition, timestamp, key, value) for topic, key, value in next(cursors[shard])])


Shipped = tuple[bytes, list[str], bytes, bytes]  # a chunk's outputs from one process, as `_shipped` packs them


def _shipped(derived: list[list[Derived]]) -> Shipped:
    """A process's outputs for its records, packed to cross the process boundary as four objects: per
    record its output count, per output its topic and key, every value in one block, and where each
    ends. (Pickled as lists of tuples they cost a fifth of each process; an output's partition and
    timestamp are its record's, which the merging side has.)"""
    counts, ends = array("I"), array("Q")
    names: list[str] = []
    values: list[bytes] = []
    end = 0
    for outputs in derived:
        counts.append(len(outputs))
        for topic, _, _, key, value in outputs:
            names += (topic, key)
            end += len(value)
            ends.append(end)
            values.append(value)
    return counts.tobytes(), names, ends.tobytes(), b"".join(values)


def _unpacked(shipped: Shipped) -> Iterator[list[tuple[str, str, bytes]]]:
    """Per record, in order, the (topic, key, value) of each output `_shipped` packed."""
    raw_counts, names, raw_ends, values = shipped
    counts, ends = array("I"), array("Q")
    counts.frombytes(raw_counts)
    ends.frombytes(raw_ends)
    at = start = 0
    for count in counts:
        outputs = []
        for _ in range(count):
            end = ends[at]
            outputs.append((names[2 * at], names[2 * at + 1], values[start:end]))
            at += 1
            start = end
        yield outputs


def _derive_shard(inbox: Any, outbox: Any, topic_prefix: str) -> None:
    """One process's share of a parallel replay: the keys sent to it, folded in the order received."""
    replayer = Replayer(topic_prefix=topic_prefix)
    while (part := inbox.get()) is not None:
        outbox.put(_shipped([replayer.derive(SourceRecord(*fields)) for fields in part]))
    outbox.put(replayer.counts)
