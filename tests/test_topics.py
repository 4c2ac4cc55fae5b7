"""Topic settings on a real broker: `declare_topics` makes missing topics with tribunal's settings and brings
existing ones to them."""

from __future__ import annotations

import asyncio

from streams.settings import Settings
from streams.topics import declare_topics
from tests.helpers import create_topic, topic_settings


def test_a_missing_topic_is_made_and_an_existing_one_gets_the_settings_keeping_its_own(kafka: str, unique: str) -> None:
    settings = Settings(kafka_bootstrap=kafka)
    topic, missing = f"{unique}-state-changelog", f"{unique}-made-here"
    asyncio.run(create_topic(kafka, topic, {"cleanup.policy": "compact", "retention.ms": "12345"}))
    wanted = {"segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.1"}

    assert declare_topics(settings, {topic: wanted, missing: wanted}) == ([missing], [topic])

    assert asyncio.run(topic_settings(kafka, topic)) == {"cleanup.policy": "compact", "retention.ms": "12345",
                                                         **wanted}
    assert asyncio.run(topic_settings(kafka, missing)) == wanted  # made with them
    assert declare_topics(settings, {topic: wanted, missing: wanted}) == ([], [])  # already so: nothing to do
