"""A replay on several processes: keys are independent, so each process folds the keys it owns, and the outputs
are merged back into input order, the same bytes as on one process."""

from __future__ import annotations

import multiprocessing
import queue
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from streams.core.folds import route
from streams.core.source import SourceRecord
from streams.lines import Output, ReplayInputError
from streams.replay.replayer import Derived, Replayer

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
