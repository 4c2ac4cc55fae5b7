"""A worker's own small Kafka clients, beside Faust's: for checks Faust does not offer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams import kafka


@dataclass
class Sideband:
    """A group-less read_committed consumer and an admin client, connected on first use."""

    bootstrap: str
    _clients: tuple[Any, Any] | None = field(default=None, init=False)

    async def clients(self) -> tuple[Any, Any]:
        if self._clients is None:
            consumer = kafka.consumer(self.bootstrap)
            admin = kafka.admin(self.bootstrap)
            await consumer.start()
            await admin.start()
            self._clients = (consumer, admin)
        return self._clients

    async def committed(self, group: str, partitions: list[Any]) -> dict[Any, int]:
        """The group's committed offset of each partition (0 where it has none)."""
        _, admin = await self.clients()
        offsets = await admin.list_consumer_group_offsets(group, partitions=partitions)
        return {tp: (offsets[tp].offset if tp in offsets and offsets[tp].offset >= 0 else 0) for tp in partitions}
