"""Guarding the agent against records Faust skips: re-fetch them before going on.

Under SIGKILLs and the recoveries that follow, Faust (0.15) hands the agent a partition's records
with a hole in them: its fetch loop marks a message read even when a flow suspension (recovery,
rebalance) cancels its delivery, and then registers the hole as a "gap" whose offsets count as
acknowledged, so the next commit would step over records nobody processed (seen in
tests/agents/test_crash.py: offset 841 handed while 834 was next).

So the agent checks that each input partition arrives contiguously: the first record after an
assignment must be the group's committed offset, each next one the offset after the last. A
jump over records Kafka really holds (asked through a side consumer; compaction and transaction
markers leave legitimate holes) makes the guard undo Faust's gap, seek the partition back to the
first missing offset, and drop, unacknowledged, whatever arrives before that offset does. Nothing
is applied out of order and nothing is committed past the hole.

This reaches into Faust's consumer (`_gap`, `_unacked_messages`); should the refetch not come,
the stall watchdog restarts the worker in place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from streams.agents.sideband import Sideband

log = logging.getLogger(__name__)


@dataclass
class Continuity:
    app: Any
    bootstrap: str
    _next: dict[tuple[str, int], int] = field(default_factory=dict)
    _rewinding: dict[tuple[str, int], int] = field(default_factory=dict)  # partition -> offset awaited
    _generation: int | None = None
    sideband: Sideband = field(init=False)

    def __post_init__(self) -> None:
        self.sideband = Sideband(self.bootstrap)

    async def _first_offset_from(self, topic: str, partition: int, start: int) -> int | None:
        """The offset of the first record Kafka holds at or after `start` (None if there is none yet)."""
        from aiokafka import TopicPartition

        consumer, _ = await self.sideband.clients()
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        batch = await consumer.getmany(tp, timeout_ms=3000, max_records=1)
        records = batch.get(tp, [])
        return records[0].offset if records else None

    async def admit(self, event: Any) -> bool:
        """True if `event` is the next record of its partition; False if it must be dropped for now."""
        message = event.message
        topic, partition, offset = message.topic, message.partition, message.offset
        generation = self.app.consumer_generation_id
        if generation != self._generation:
            self._next.clear()  # a new assignment starts from the committed offsets
            self._rewinding.clear()
            self._generation = generation
        key = (topic, partition)
        rewind_to = self._rewinding.get(key)
        if rewind_to is not None:
            if offset != rewind_to:
                self._drop(message)
                return False
            del self._rewinding[key]
        expected = self._next.get(key)
        if expected is None:
            from aiokafka import TopicPartition

            tp = TopicPartition(topic, partition)
            expected = (await self.sideband.committed(self.app.conf.id, [tp]))[tp]
        if offset > expected:
            first = await self._first_offset_from(topic, partition, expected)
            if first is not None and first < offset:
                log.warning("%s[%d]: handed offset %d while %d is next: Faust skipped records; re-fetching from %d",
                            topic, partition, offset, first, first)
                await self._rewind(message, first)
                return False
        self._next[key] = offset + 1
        return True

    def _drop(self, message: Any) -> None:
        """Let `message` go without acknowledging it, so no commit covers its offset."""
        message.acked = True  # Faust's ack() is a no-op for a message marked acked
        self.app.consumer._unacked_messages.discard(message)

    async def _rewind(self, message: Any, first: int) -> None:
        consumer = self.app.consumer
        tp = message.tp
        gaps = consumer._gap.get(tp)
        if gaps:
            gaps.chop(first, message.offset + 1)  # the hole is not a gap: nobody processed it
        self._drop(message)
        self._rewinding[(message.topic, message.partition)] = first
        await consumer.seek(tp, first)
