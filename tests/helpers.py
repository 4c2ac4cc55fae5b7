"""Helpers shared by the integration tests: the CLI as a user runs it, and reading topics."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))


def tribunal(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `.venv/bin/tribunal ARGS` and return its completed process."""
    proc = subprocess.run([TRIBUNAL, *args], capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"tribunal {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


async def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 90.0) -> list[Any]:
    """Read `topic` from the start as a downstream consumer would, until `expected` records or timeout."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                isolation_level="read_committed", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(records) < expected and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp in sorted(batch, key=lambda t: t.partition):
                records.extend(batch[tp])
    finally:
        await consumer.stop()
    return records


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic) or set()
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()
