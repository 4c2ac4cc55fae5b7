"""A worker's starts (and final failures) as a stream a tenant follows over HTTP, resumable at a cursor.

A namespace's records are on one partition of `job-starts` and one of `job-outcomes` (keyed by it), so
where a reader stands is two offsets: the cursor `S:s:O:o` says the next record to read is offset `s`
of partition `S` of job-starts and `o` of partition `O` of job-outcomes. Every event the API sends
carries the cursor just past it as its server-sent-events `id`; a client that reconnects with the id of
the last event it handled (`Last-Event-ID`) resumes right after it: nothing it acknowledged comes again,
nothing after it is lost. The stream begins with a `ready` event whose id is where it starts (the end of
both topics, for a client without a cursor), so a client that handled nothing yet resumes there too.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from streams import kafka
from streams.core.dispatch import JOB_OUTCOMES, JOB_STARTS
from streams.errors import TribunalError
from streams.settings import Settings

CURSOR = re.compile(r"(\d{1,6}):(\d{1,19}):(\d{1,6}):(\d{1,19})")


class BadCursor(ValueError):
    """A `Last-Event-ID` that is no cursor of this API's."""


@dataclass(frozen=True)
class Cursor:
    starts_partition: int
    starts: int
    outcomes_partition: int
    outcomes: int

    def __str__(self) -> str:
        return f"{self.starts_partition}:{self.starts}:{self.outcomes_partition}:{self.outcomes}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = CURSOR.fullmatch(text.strip())
        if match is None:
            raise BadCursor(f"{text!r} is not a cursor (partition:offset:partition:offset, as an event's id)")
        return cls(*map(int, match.groups()))


@dataclass(frozen=True)
class Event:
    kind: str  # "ready", "JobStarted", "JobFailedFinally"
    cursor: Cursor
    data: dict[str, Any]


async def follow(settings: Settings, namespace: str, worker: str, after: Cursor | None) -> AsyncIterator[Event]:
    """`worker`'s starts and final failures in `namespace` from `after` (else from now), until cancelled."""
    from aiokafka import TopicPartition

    starts, outcomes = settings.topic(JOB_STARTS), settings.topic(JOB_OUTCOMES)
    consumer = kafka.consumer(settings.kafka_bootstrap, auto_offset_reset="earliest")  # a cursor past retention:
    # from the oldest record kept, not from the end (a start deleted unseen is lost either way; none kept is)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()  # every topic's partitions (as `clients.read_log` reads them)
        where = {}
        for topic, partition, offset in ((starts, after and after.starts_partition, after and after.starts),
                                         (outcomes, after and after.outcomes_partition, after and after.outcomes)):
            count = len(consumer.partitions_for_topic(topic) or ())
            if count == 0:
                raise TribunalError(f"topic {topic} does not exist (tribunal topics create)")
            home = kafka.partition_for(namespace, count)
            if partition is not None and partition != home:
                raise BadCursor(f"the cursor names partition {partition} of {topic}; namespace {namespace!r} is on "
                                f"{home} (the topic's partitions changed?)")
            where[topic] = (TopicPartition(topic, home), offset)
        consumer.assign([tp for tp, _ in where.values()])
        position: dict[str, int] = {}
        for topic, (tp, offset) in where.items():
            if offset is None:
                await consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, offset)
            position[topic] = await consumer.position(tp)
        s, o = where[starts][0], where[outcomes][0]

        def cursor() -> Cursor:
            return Cursor(s.partition, position[starts], o.partition, position[outcomes])

        yield Event("ready", cursor(), {"namespace": namespace, "worker": worker})
        while True:
            batch = await consumer.getmany(s, o, timeout_ms=1000)
            for tp in (s, o):  # a start before its outcomes
                for message in batch.get(tp, ()):
                    position[tp.topic] = message.offset + 1
                    value = kafka.object_of(message.value)
                    if value is None or value.get("namespace") != namespace or value.get("worker") != worker:
                        continue
                    kind = value.get("type")
                    if (tp is s and kind == "JobStarted") or (tp is o and kind == "JobFailedFinally"):
                        yield Event(str(kind), cursor(), value)
    finally:
        await consumer.stop()


def sse(event: Event) -> bytes:
    """One event in the text/event-stream format (its data one line of JSON)."""
    return f"id: {event.cursor}\nevent: {event.kind}\ndata: ".encode() + orjson.dumps(event.data) + b"\n\n"
