"""The catalogue of tribunal's topics and creating them on the broker.

Faust subscribes only to topics that exist when a worker starts (a missing source topic is
"ignored", and records produced to it later are never read), so `tribunal worker` and
`tribunal topics create` make every topic up front with the partitions and cleanup policy it needs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from streams.core.deadletter import dlq_topic
from streams.core.intake import APP_METRICALS
from streams.settings import Settings

PLUGIN_DECIDER = "plugin_decider"
PLUGIN_JUSTICE = "plugin_justice"
METRIC_CHANNELS = (PLUGIN_DECIDER, PLUGIN_JUSTICE)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    compacted: bool = False

    def config(self) -> dict[str, str]:
        return {"cleanup.policy": "compact" if self.compacted else "delete"}


def catalogue(settings: Settings) -> list[TopicSpec]:
    """Every topic tribunal reads or writes, with the deployment's prefix applied."""
    names = [*METRIC_CHANNELS, *(dlq_topic(c) for c in METRIC_CHANNELS), APP_METRICALS]
    return [TopicSpec(settings.topic(n)) for n in names]


async def _create(settings: Settings, specs: list[TopicSpec]) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        if missing:
            await admin.create_topics([
                NewTopic(s.name, settings.partitions, settings.replication_factor, topic_configs=s.config())
                for s in missing
            ])
        return [s.name for s in missing]
    finally:
        await admin.close()


def create_topics(settings: Settings, specs: list[TopicSpec] | None = None) -> list[str]:
    """Create whichever catalogue topics are missing; return their names (idempotent)."""
    return asyncio.run(_create(settings, specs if specs is not None else catalogue(settings)))
