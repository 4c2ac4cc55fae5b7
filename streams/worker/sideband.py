"""A worker's own small Kafka clients, beside Faust's: for checks Faust does not offer."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import KafkaError

from streams import kafka


@dataclass
class Sideband:
    """A group-less read_committed consumer and an admin client, connected on first use."""

    bootstrap: str
    _clients: tuple[Any, Any] | None = field(default=None, init=False)

    async def clients(self) -> tuple[Any, Any]:
        if self._clients is None:
            consumer = kafka.consumer(self.bootstrap, fetch_max_wait_ms=kafka.FETCH_WAIT_MS)
            admin = kafka.admin(self.bootstrap)
            await consumer.start()
            await admin.start()
            self._clients = (consumer, admin)
        return self._clients

    async def committed(self, group: str, partitions: list[Any], patience: float = 60.0) -> dict[Any, int]:
        """The group's committed offset of each partition (0 where it has none), asked again for up to `patience`
        seconds while the group's coordinator does not answer (its broker lost: another takes the group over)."""
        _, admin = await self.clients()
        deadline = time.monotonic() + patience
        while True:
            try:
                offsets = await admin.list_consumer_group_offsets(group, partitions=partitions)
            except (TimeoutError, KafkaError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            return {tp: (offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 else 0) for tp in partitions}
