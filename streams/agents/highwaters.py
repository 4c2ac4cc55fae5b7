"""Recovery must know how far each changelog goes: ask the broker, not a cache.

Under exactly-once, faust-streaming 0.15 takes a changelog partition's highwater from aiokafka's
`last_stable_offset(tp)`, which is only known once the consumer has fetched from that partition.
A worker that starts recovering before its first fetch gets None, which Faust reads as "empty
changelog": it skips recovery and folds on from empty state. Seen in CI after a quick restart
(tests/agents/test_crash_groups.py: every group's seq started again at 1 while the changelog held
hundreds of records). A read_committed consumer's `end_offsets` asks the broker, and the broker
answers with the last stable offset, so that is what recovery now uses. (The same symptom,
"Faust does not rebuild state when it is unable to get the highwater offsets", is
robinhood/aiokafka#7, open.)

This replaces one method of Faust's aiokafka consumer thread, for the whole process.
"""

from __future__ import annotations

from typing import Any


def ask_the_broker() -> None:
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    async def _highwaters(self: Any, partitions: list[Any]) -> Any:
        return await self._ensure_consumer().end_offsets(partitions)

    AIOKafkaConsumerThread._highwaters = _highwaters
