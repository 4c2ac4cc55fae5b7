"""Topic settings on a real broker: `declare_topics` makes missing topics with tribunal's settings and brings
existing ones to them."""

from __future__ import annotations

import asyncio
import time

from streams.settings import Settings
from streams.topics import create_topics, declare_topics
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


CLOCKED = ("dispatch-commands", "ticks", "plugin_decider", "plugin_justice", "policies", "cluster-events")
HOUR = 3_600_000


async def _produce_and_read_back(kafka: str, topic: str, timestamp_ms: int) -> tuple[int, int]:
    """Write one record stamped `timestamp_ms` by its producer; (timestamp, timestamp type) as stored."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=kafka)
    await producer.start()
    try:
        sent = await (await producer.send(topic, b"{}", key=b"ns", timestamp_ms=timestamp_ms))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka, enable_auto_commit=False)
    await consumer.start()
    try:
        where = TopicPartition(topic, sent.partition)
        consumer.assign([where])
        consumer.seek(where, sent.offset)
        record = await asyncio.wait_for(consumer.getone(), 30)
        return record.timestamp, record.timestamp_type
    finally:
        await consumer.stop()


def test_the_clocked_folds_inputs_are_dated_by_the_broker_whatever_a_producers_clock_says(
        kafka: str, unique: str) -> None:
    settings = Settings(kafka_bootstrap=kafka, topic_prefix=f"{unique}.")
    commands = settings.topic("dispatch-commands")
    asyncio.run(create_topic(kafka, commands, {"retention.ms": "86400000"}, partitions=settings.partitions))
    assert settings.topic("ticks") in create_topics(settings)  # as a daemon starts: made so, the old one left
    assert "message.timestamp.type" not in asyncio.run(topic_settings(kafka, commands))
    made = create_topics(settings, change=True)  # `topics create`: an earlier version's topic is changed
    assert made == []
    for topic in CLOCKED:
        assert asyncio.run(topic_settings(kafka, settings.topic(topic))).get("message.timestamp.type") == \
            "LogAppendTime", topic
    assert asyncio.run(topic_settings(kafka, commands))["retention.ms"] == "86400000"  # its own settings kept
    assert "message.timestamp.type" not in asyncio.run(topic_settings(kafka, settings.topic("scheduler-events")))

    before = int(time.time() * 1000)
    stamped, kind = asyncio.run(_produce_and_read_back(kafka, commands, before + HOUR))
    assert kind == 1 and before - 1_000 <= stamped <= int(time.time() * 1000) + 1_000  # the broker's time

    trusting = Settings(kafka_bootstrap=kafka, topic_prefix=f"{unique}p.", record_time="producer")
    create_topics(trusting, change=True)
    assert asyncio.run(topic_settings(kafka, trusting.topic("ticks")))["message.timestamp.type"] == "CreateTime"
    assert asyncio.run(_produce_and_read_back(kafka, trusting.topic("ticks"), before + HOUR)) == (before + HOUR, 0)
