"""A record's way through the worker, in one place: admit, route, load, apply, hand over; and then,
for the batch it joined, write, commit and mark done.

Every step has one owner, and `Unit` is where they meet:

1. **admit** (`streams.worker.continuity`): is this the next record of its partition? Faust may
   hand over records out of order or skip some; the guard re-fetches them first.
2. **route** (`streams.worker.routing`): a record whose key lives in another partition is
   forwarded there and folded when it arrives.
3. **load** (`streams.worker.keeper`): the key's state, decoded once per assignment and kept in memory.
4. **apply** (`Fold.apply`, pure): the new state and the outputs; a fold that raises costs one
   dead-lettered record, never the worker.
5. **hand over** (`Checkpoint.add`): the outputs and the changed key join the current batch.
6. **write, commit, done** (`streams.worker.checkpoint`): the flusher writes each changed state
   once and the batch's outputs in the source partitions' transactions, marks the offsets done
   once the broker acknowledged them, and commits.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from streams.core.deadletter import Rejected
from streams.core.source import SourceRecord, record_key
from streams.kafka import partition_for
from streams.logs import about
from streams.worker import routing
from streams.worker.checkpoint import Checkpoint
from streams.worker.keeper import Keeper
from streams.worker.surface import Event

log = logging.getLogger(__name__)


def source_record(event: Event) -> SourceRecord:
    m = event.message
    return SourceRecord(topic=m.topic, partition=m.partition, offset=m.offset,
                        timestamp=round(m.timestamp * 1000) if m.timestamp else 0,
                        key=m.key, value=m.value)


class Unit:
    """One fold's per-record unit: what its agent does with each event Faust hands over.

    `names` maps each input topic's full name (prefixed) to the name the fold knows it by;
    `repartition` is the full name of the fold's repartition topic.
    """

    def __init__(self, keeper: Keeper[Any], checkpoint: Checkpoint, names: dict[str, str], repartition: str,
                 partitions: int, progress: Progress) -> None:
        self.keeper = keeper
        self.fold = keeper.fold
        self.checkpoint = checkpoint
        self.names = names
        self.repartition = repartition
        self.partitions = partitions
        self.progress = progress

    async def process(self, event: Event) -> None:
        """Admit `event`, and if it is its partition's next record, fold it into the current batch."""
        checkpoint = self.checkpoint
        stats = checkpoint.stats
        started = time.perf_counter()
        # Room is checked last: a record admitted before a rebalance is not folded after it.
        if await checkpoint.continuity.admit(event) and await checkpoint.room():
            folding = time.perf_counter()
            stats.admit += folding - started
            checkpoint.follow_generation()
            self.fold_one(event)
            elapsed = time.perf_counter() - folding
            stats.fold += elapsed
            checkpoint.tally.fold.observe(elapsed)

    def fold_one(self, event: Event) -> None:
        """Route, load, apply and hand over one admitted record (no await: the batch cannot be taken midway)."""
        fold, checkpoint, m = self.fold, self.checkpoint, event.message
        record = source_record(event)
        if m.topic == self.repartition:
            try:
                record = routing.original(record.topic, m.partition, m.offset, m.key, m.value, m.headers)
            except routing.NotForwarded as exc:  # not ours: say so, touch no state
                log.error("%s", exc, extra=about(fold.name, None, record.topic, record.partition, record.offset))
                _, outputs = fold.reject(fold.empty(), record, Rejected("not_forwarded", str(exc)), record_key(record))
                checkpoint.add(event, outputs)
                return
        logical = self.names.get(record.topic, record.topic)
        key = fold.key_of(record, logical)
        home = partition_for(key, self.partitions)
        if m.topic != self.repartition and home != m.partition:
            checkpoint.add(event, sends=[routing.forward(record, key, self.repartition, home)])
            self.progress.count(record, forwarded=True)
            return
        try:
            before = self.keeper.load(key)
        except Exception as exc:  # an unreadable table entry: report the record, keep the entry
            log.exception("cannot load the state of %s %r", fold.name, key,
                          extra=about(fold.name, key, record.topic, record.partition, record.offset))
            _, outputs = fold.reject(fold.empty(), record, Rejected("state_unreadable", repr(exc)), key)
            checkpoint.add(event, outputs, record.topic)
            return
        try:
            after, outputs = fold.step(before, record, logical)
        except Exception as exc:  # a bug must cost one record, not the worker
            log.exception("fold failed on %s[%s]@%s", record.topic, record.partition, record.offset,
                          extra=about(fold.name, key, record.topic, record.partition, record.offset))
            after, outputs = fold.reject(before, record, Rejected("internal_error", repr(exc)), key)
        if after is before:
            checkpoint.add(event, outputs, record.topic)
        else:
            self.keeper.keep(key, before, after)
            checkpoint.add(event, outputs, record.topic, keeper=self.keeper, key=key)
        self.progress.count(record)


class Progress:
    """A log line every 10 s while records flow: how many, how fast, and the last one folded."""

    def __init__(self) -> None:
        self.total = 0
        self.forwarded = 0
        self.reported = 0
        self.last: SourceRecord | None = None
        self.since = time.monotonic()

    def count(self, record: SourceRecord, forwarded: bool = False) -> None:
        """One record handled: folded, or forwarded to its key's partition (folded when it arrives there)."""
        self.total += 1
        self.forwarded += forwarded
        self.last = record

    def report(self) -> None:
        now = time.monotonic()
        if self.total != self.reported and self.last is not None:
            rate = (self.total - self.reported) / (now - self.since)
            log.info("handled %d records (%.0f/s; %d forwarded to their key's partition); last %s[%d]@%d",
                     self.total, rate, self.forwarded, self.last.topic, self.last.partition, self.last.offset)
        self.reported, self.since = self.total, now
