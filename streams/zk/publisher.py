"""Records from kazoo's threads into Kafka, in the order they were submitted.

Kazoo calls watches on its own thread; aiokafka lives on an asyncio loop. `submit` may be called
from any thread; one task sends everything in submission order through one idempotent producer,
so a group's events (one key, one partition) keep their order on the topic.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from streams import kafka

log = logging.getLogger(__name__)


class Publisher:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.loop: asyncio.AbstractEventLoop | None = None
        self.queue: asyncio.Queue[tuple[str, str, bytes] | None] | None = None
        self.sent = 0

    async def __aenter__(self) -> Publisher:
        self.loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()
        self.producer = kafka.producer(self.bootstrap, acks="all", linger_ms=5)
        await self.producer.start()
        self.task = asyncio.create_task(self._send_all())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.queue is not None
        await self.queue.put(None)
        await self.task
        await self.producer.stop()

    def submit(self, topic: str, key: str, value: Any) -> None:
        """Queue a record (a JSON-able value or bytes); safe from any thread."""
        assert self.loop is not None and self.queue is not None
        data = value if isinstance(value, bytes) else orjson.dumps(value)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (topic, key, data))

    async def _send_all(self) -> None:
        assert self.queue is not None
        while True:
            item = await self.queue.get()
            if item is None:
                await self.producer.flush()
                return
            topic, key, value = item
            delivery = await self.producer.send(topic, value, key=key.encode())
            delivery.add_done_callback(self._delivered)
            self.sent += 1

    @staticmethod
    def _delivered(delivery: asyncio.Future[Any]) -> None:
        if not delivery.cancelled() and delivery.exception() is not None:
            log.error("a record could not be delivered: %s", delivery.exception())
