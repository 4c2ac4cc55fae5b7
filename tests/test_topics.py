"""Topic settings on a real broker: `conform_topics` brings existing topics to tribunal's settings."""

from __future__ import annotations

import asyncio

from streams.settings import Settings
from streams.topics import conform_topics
from tests.helpers import create_topic, topic_settings


def test_an_existing_topic_gets_the_settings_and_keeps_its_own(kafka: str, unique: str) -> None:
    settings = Settings(kafka_bootstrap=kafka)
    topic, missing = f"{unique}-state-changelog", f"{unique}-never-made"
    asyncio.run(create_topic(kafka, topic, {"cleanup.policy": "compact", "retention.ms": "12345"}))
    wanted = {"segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.1"}

    assert conform_topics(settings, {topic: wanted, missing: wanted}) == [topic]

    assert asyncio.run(topic_settings(kafka, topic)) == {"cleanup.policy": "compact", "retention.ms": "12345",
                                                         **wanted}
    assert conform_topics(settings, {topic: wanted}) == []  # already so: nothing to change
