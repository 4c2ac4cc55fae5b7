"""Guarding the agent against records Faust skips or hands over out of order.

Under repeated SIGKILLs and the rebalances that follow, this worker was once handed an input
record *after* a later one of the same partition (tests/agents/test_crash.py: offset 78 of a
pool before its offset 76). The pool fold takes any offset at or below the last one applied for
a redelivery and drops it, so that input would never be decided.

The mechanism, read off this worker's logs: a rebalance truncates a fetched batch (Faust stops
yielding a batch when the group generation changes), while Faust's read offset already counts the
whole batch, so the records after the cut are neither delivered nor fetched again.

The agent therefore checks that each input partition is delivered contiguously: the first record
after an assignment must be the group's committed offset, and each next one the offset after the
last. A jump is fine when Kafka holds nothing in between (compaction, transaction markers); when
it does hold records there, Faust skipped them, and the worker restarts in place before applying
anything (`streams.agents.watchdog.restart_in_place`): exactly-once resumes from the committed
offsets as after any crash.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from streams.agents.sideband import Sideband
from streams.agents.watchdog import restart_in_place

log = logging.getLogger(__name__)


@dataclass
class Continuity:
    app: Any
    bootstrap: str
    _next: dict[tuple[str, int], int] = field(default_factory=dict)
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

    async def admit(self, topic: str, partition: int, offset: int) -> None:
        """Return if `offset` is the next record of its partition; restart the worker if Faust skipped some."""
        generation = self.app.consumer_generation_id
        if generation != self._generation:
            self._next.clear()  # a new assignment starts from the committed offsets
            self._generation = generation
        key = (topic, partition)
        expected = self._next.get(key)
        if expected is None:
            from aiokafka import TopicPartition

            tp = TopicPartition(topic, partition)
            expected = (await self.sideband.committed(self.app.conf.id, [tp]))[tp]
        if offset > expected:
            first = await self._first_offset_from(topic, partition, expected)
            if first is not None and first < offset:
                log.error("%s[%d]: handed offset %d while %d is next and present: Faust skipped records; "
                          "restarting the worker in place", topic, partition, offset, first)
                restart_in_place()
        self._next[key] = offset + 1
