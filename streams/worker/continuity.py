"""Guarding the agents against records Faust skips, and committing only what was really folded.

Under SIGKILLs and the recoveries that follow, Faust (0.15) hands an agent a partition's records
with holes in them, and its offset bookkeeping commits over the holes (seen in
tests/worker/test_crash.py, and in CI as decisions missing by cause):

* its fetch loop marks a message read even when a flow suspension (recovery, rebalance) cancels
  its delivery, and drops every later-fetched message at or below that read offset;
* it registers any jump between read offsets as a "gap" that counts as acknowledged (offsets
  `[read + 1, next]`, inclusive), so the next commit steps over records nobody processed; a
  batch still being iterated after a seek registers such a gap from the seek point.

So this guard owns the partition's position. Each input partition must arrive contiguously: the
first record after an assignment is the group's committed offset, each next one the offset after
the last. A jump over records Kafka really holds (asked through a side consumer; compaction and
transaction markers leave legitimate holes, which it then steps over) makes the guard seek the
partition back to the first missing offset and drop, unacknowledged, whatever arrives before that
offset does (seeking again after each, since each such arrival moved Faust's read offset past
it). And the offset Faust commits for a partition is taken from the guard, not from Faust's
acknowledgements and gaps: the offset after the last record whose effects went into the
transaction, so a commit can never cover a record that was not folded.

The decisions are a pure state machine, `streams.worker.positions`; this module only asks the
broker what the machine needs to know and seeks Faust's consumer. It replaces two methods of
Faust's consumer instance (through `streams.worker.faust_private`, which holds every such touch);
should a refetch never come, the stall watchdog restarts the worker in place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from faust.types import TP

from streams import logs
from streams.worker import faust_private
from streams.worker.positions import Admit, AskCommitted, AskHeld, Drop, Positions
from streams.worker.sideband import Sideband
from streams.worker.surface import App, Event
from streams.worker.watchdog import restart_in_place

log = logging.getLogger(__name__)


@dataclass
class Continuity:
    """The guard's shell: asks the broker what `Positions` needs to know, and seeks Faust's consumer."""

    app: App
    bootstrap: str
    positions: Positions = field(default_factory=Positions)
    _installed: bool = False
    refetches: int = 0  # times Faust skipped records and they were fetched again (`/metrics`)
    _asking: asyncio.Lock = field(default_factory=asyncio.Lock)
    _committed: dict[tuple[str, int], int] = field(default_factory=dict)  # answers not used yet, of one generation
    _committed_generation: int | None = None
    sideband: Sideband = field(init=False)

    def __post_init__(self) -> None:
        self.sideband = Sideband(self.bootstrap)

    def _install(self) -> None:
        """Make Faust commit the guard's offsets, and never its own gaps."""
        faust_private.commit_only(self.app.consumer, lambda tp: self.positions.to_commit((tp.topic, tp.partition)))
        self._installed = True

    @property
    def generation(self) -> int | None:
        """The consumer group generation the admitted records belong to."""
        return self.positions.generation

    def done(self, topic: str, partition: int, offset: int, generation: int | None) -> None:
        """The effects of the partition's records up to `offset`, admitted in `generation`, are in the
        transaction: their offsets may be committed."""
        self.positions.done((topic, partition), offset, generation)

    def done_offsets(self) -> dict[tuple[str, int], int]:
        """The offset to commit of each partition with records done in the current generation."""
        return self.positions.done_offsets()

    async def first_offset_from(self, topic: str, partition: int, start: int, before: int) -> int | None:
        """The offset of the first record Kafka holds in [start, before), or None if it holds none there."""
        return (await self.first_offsets_from({(topic, partition): (start, before)}))[(topic, partition)]

    async def first_offsets_from(self, asks: Mapping[tuple[str, int], tuple[int, int]]
                                 ) -> dict[tuple[str, int], int | None]:
        """`first_offset_from` for several partitions at once, each (topic, partition) -> (start, before).

        An empty fetch proves nothing (a fresh consumer on a loaded broker can time out), so this
        reads until a record comes or the side consumer's position has passed `before`; after a
        minute of neither it restarts the worker rather than guess. One question at a time: every
        fold's agent, the stall watchdog and recovery's end ask through the one side consumer,
        which each question re-assigns.
        """
        async with self._asking:
            return await self._first_offsets_from(asks)

    async def _first_offsets_from(self, asks: Mapping[tuple[str, int], tuple[int, int]]
                                  ) -> dict[tuple[str, int], int | None]:
        from aiokafka import TopicPartition

        consumer, _ = await self.sideband.clients()
        tps = {TopicPartition(*key): key for key in asks}
        consumer.assign(list(tps))
        for tp, key in tps.items():
            consumer.seek(tp, asks[key][0])
        found: dict[tuple[str, int], int | None] = {}
        deadline = time.monotonic() + 60
        while True:
            waiting = [tp for tp, key in tps.items() if key not in found]
            if not waiting:
                return found
            batch = await consumer.getmany(*waiting, timeout_ms=100, max_records=len(waiting))  # one is enough
            for tp in waiting:
                key, before = tps[tp], asks[tps[tp]][1]
                records = batch.get(tp, [])
                if records:
                    found[key] = records[0].offset if records[0].offset < before else None
                elif await consumer.position(tp) >= before:  # only aborted records and markers: read past them
                    found[key] = None
            if time.monotonic() > deadline:
                log.error("cannot read %s to check for records; restarting",
                          ", ".join(f"{t}[{p}] {asks[(t, p)][0]}..{asks[(t, p)][1]}" for t, p in asks
                                    if (t, p) not in found))
                restart_in_place()

    async def _committed_offset(self, tp: tuple[str, int], generation: int | None) -> int:
        """The group's committed offset of `tp`, asked at its first record in `generation` together with those of
        every other partition assigned, whose answers wait for their own first records (each used once).

        One question an assignment instead of one a partition: each is a round trip to the group coordinator that
        the partition's agent waits out, and after a start or a rebalance the partitions' first records came one
        after another, each asking in turn. An answer kept is still the group's offset
        when its partition's first record comes: only this member commits the partition in this generation (an
        earlier owner committed before the assignment; a zombie is fenced by this member's producers, started
        at the assignment), and it commits a partition only after admitting that partition's records."""
        from aiokafka import TopicPartition

        if generation != self._committed_generation:
            self._committed.clear()
            self._committed_generation = generation
        known = self._committed.pop(tp, None)
        if known is not None:
            return known
        asked = {TopicPartition(*tp)} | {TopicPartition(t.topic, t.partition) for t in self.app.consumer.assignment()
                                          if (t.topic, t.partition) not in self._committed}
        answers = await self.sideband.committed(self.app.conf.id, sorted(asked))
        if generation == self._committed_generation == self.app.consumer_generation_id:
            self._committed.update({(t.topic, t.partition): offset for t, offset in answers.items()})
            self._committed.pop(tp, None)
        return answers[TopicPartition(*tp)]

    async def admit(self, event: Event) -> bool:
        """True if `event` is the next record of its partition; False if it must not be folded now."""
        if not self._installed:
            self._install()
        message = event.message
        topic, partition, offset = message.topic, message.partition, message.offset
        tp, generation = (topic, partition), self.app.consumer_generation_id
        verdict = self.positions.arrive(tp, offset, generation)
        if isinstance(verdict, AskCommitted):
            verdict = self.positions.committed(tp, offset, generation, await self._committed_offset(tp, generation))
        if isinstance(verdict, AskHeld):
            first = await self.first_offset_from(topic, partition, verdict.start, verdict.before)
            verdict = self.positions.held(tp, offset, generation, first)
            if isinstance(verdict, Drop):
                self.refetches += 1
                log.warning("%s[%d]: handed offset %d while %d is next: Faust skipped records; re-fetching from %d",
                            topic, partition, offset, first, first,
                            extra=logs.cause(topic, partition, offset))
        if isinstance(verdict, Drop):
            faust_private.let_go(self.app.consumer, message)
            if verdict.seek is not None:
                # In the consumer's thread: aiokafka's seek from this one raced its fetcher (KeyError, a crash).
                await self.app.consumer.seek_wait({TP(topic, partition): verdict.seek})
        return isinstance(verdict, Admit)
