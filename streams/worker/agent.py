"""One Faust agent per fold: admit a record, route it to its key's partition, fold it, hand its effects over."""

from __future__ import annotations

import logging
import time
from typing import Any

import faust

from streams.core.deadletter import Rejected
from streams.core.source import SourceRecord, record_key
from streams.settings import Settings
from streams.worker import routing
from streams.worker.checkpoint import Checkpoint
from streams.worker.keeper import Keeper

log = logging.getLogger(__name__)


def source_record(event: Any) -> SourceRecord:
    m = event.message
    return SourceRecord(topic=m.topic, partition=m.partition, offset=m.offset,
                        timestamp=round(m.timestamp * 1000) if m.timestamp else 0,
                        key=m.key, value=m.value)


def add_fold_agent(app: faust.App, settings: Settings, keeper: Keeper[Any], checkpoint: Checkpoint,
                   progress: Progress) -> set[str]:
    """One agent folding every input topic of `fold` and its repartition topic; returns the topic names read.

    The agent folds in memory and hands each record's effects to the checkpoint, which writes and
    commits them in batches (`streams.worker.checkpoint`). A record whose key (`fold.key_of`) maps
    to another partition than the one it arrived on is forwarded to that partition of the
    repartition topic and folded when it arrives there (`streams.worker.routing`), so one key's
    state lives in one place whoever produced the record.
    """
    fold = keeper.fold
    names = {settings.topic(t): t for t in fold.inputs}
    repartition = settings.topic(fold.repartition)
    partitions = settings.partitions
    topic = app.topic(*names, repartition, key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw", partitions=partitions)
    continuity = checkpoint.continuity

    def handle(event: Any) -> None:
        m = event.message
        record = source_record(event)
        if m.topic == repartition:
            try:
                record = routing.original(record.topic, m.partition, m.offset, m.key, m.value, m.headers)
            except routing.NotForwarded as exc:  # not ours: say so, touch no state
                log.error("%s", exc)
                _, outputs = fold.reject(fold.empty(), record, Rejected("not_forwarded", str(exc)), record_key(record))
                checkpoint.add(event, outputs)
                return
        logical = names.get(record.topic, record.topic)
        key = fold.key_of(record, logical)
        home = routing.partition_for(key, partitions)
        if m.topic != repartition and home != m.partition:
            checkpoint.add(event, sends=[routing.forward(record, key, repartition, home)])
            progress.count(record, forwarded=True)
            return
        try:
            before = keeper.load(key)
        except Exception as exc:  # an unreadable table entry: report the record, keep the entry
            log.exception("cannot load the state of %s %r", fold.name, key)
            _, outputs = fold.reject(fold.empty(), record, Rejected("state_unreadable", repr(exc)), key)
            checkpoint.add(event, outputs, record.topic)
            return
        try:
            after, outputs = fold.apply(before, record, logical)
        except Exception as exc:  # a bug must cost one record, not the worker
            log.exception("fold failed on %s[%s]@%s", record.topic, record.partition, record.offset)
            after, outputs = fold.reject(before, record, Rejected("internal_error", repr(exc)), key)
        if after is before:
            checkpoint.add(event, outputs, record.topic)
        else:
            keeper.keep(key, before, after)
            checkpoint.add(event, outputs, record.topic, keeper=keeper, key=key)
        progress.count(record)

    stats = checkpoint.stats

    async def run(stream: Any) -> None:
        handled = time.perf_counter()
        async for event in stream.events():
            started = time.perf_counter()
            stats.waiting += started - handled
            if await continuity.admit(event) and await checkpoint.room():
                folding = time.perf_counter()
                stats.admit += folding - started
                checkpoint.follow_generation()
                handle(event)
                handled = time.perf_counter()
                stats.fold += handled - folding
            else:
                handled = time.perf_counter()

    app.agent(topic, name=fold.name)(run)
    return {*names, repartition}


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
