"""Redriving dead letters: their original key and bytes produced again, once their cause is fixed.

A dead letter keeps the record it rejected whole (`original_key_b64`, `original_value_b64`; a
record too large to carry is not kept, and is skipped here) and where it came from
(`cause.topic`). `tribunal topics redrive` produces those bytes again to that
topic, keyed as they were (Kafka's default partitioner, murmur2; a keyless record stays keyless
and the worker routes it), with a `tribunal.redrive-of` header naming the dead letter.

Exactly once: each redriven record is sent in one Kafka transaction with a marker on the
compacted `dlq-redrives` topic (key: the dead letter's topic:partition:offset), and dead letters
whose marker exists are skipped, so running the command twice, or again after a crash, decides
no record twice. The transactional id is fixed per dead-letter topic, so a second redrive of the
same topic started while one runs fences the first instead of racing it. A redriven record that
fails again is a new dead letter (at a new offset), which a later redrive may take again.
"""

from __future__ import annotations

import asyncio
import base64
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams import kafka
from streams.audit.kafka_log import Bound, within
from streams.clients import KafkaUnavailable, read_log
from streams.core.source import SourceRecord
from streams.errors import TribunalError
from streams.settings import Settings
from streams.topics import REDRIVES, TopicSpec, create_topics

REDRIVE_OF = "tribunal.redrive-of"
BATCH = 500  # dead letters per transaction


@dataclass
class Summary:
    """Dead letters by reason: redriven now, redriven before (skipped), or left by the filters."""

    redriven: Counter[str] = field(default_factory=Counter)
    already: Counter[str] = field(default_factory=Counter)
    filtered: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    not_kept: int = 0  # dead letters whose original was too large to carry (read it at its cause)

    def rows(self) -> list[tuple[str, int, int, int]]:
        reasons = sorted(set(self.redriven) | set(self.already) | set(self.filtered))
        return [(r, self.redriven[r], self.already[r], self.filtered[r]) for r in reasons]


@dataclass(frozen=True)
class Letter:
    """A dead letter as redrive needs it."""

    where: str  # its own topic:partition:offset, the marker's key
    reason: str
    topic: str  # where the rejected record was written
    key: bytes | None
    value: bytes | None
    kept: bool = True  # False: the dead letter carries only the original's size


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def letter_of(record: SourceRecord) -> Letter:
    data = orjson.loads(record.value or b"null")
    return Letter(f"{record.topic}:{record.partition}:{record.offset}", str(data["reason_code"]),
                  str(data["cause"]["topic"]), _b64(data.get("original_key_b64")),
                  _b64(data.get("original_value_b64")), bool(data.get("kept", True)))


async def redrive(settings: Settings, dlq: str, reason: str | None, start: Bound | None, end: Bound | None,
                  progress: Callable[[int], Any] | None = None) -> Summary:
    """Produce again every dead letter of `dlq` (a real topic name) that passes the filters, once."""
    from aiokafka.errors import KafkaError

    if not dlq.endswith(".dlq"):
        raise TribunalError(f"{dlq} is not a dead-letter topic (they end in .dlq)")
    markers = settings.topic(REDRIVES)
    await asyncio.to_thread(create_topics, settings, [TopicSpec(markers, compacted=True)])
    done = {r.key.decode() for r in await read_log(settings.kafka_bootstrap, [markers]) if r.key is not None}
    letters = await read_log(settings.kafka_bootstrap, [dlq])
    if not letters:
        raise TribunalError(f"{dlq} holds no dead letters (does it exist? topics are named with the prefix "
                            f"{settings.topic_prefix!r})")
    in_range = within(start, end)
    summary = Summary()
    todo: list[Letter] = []
    for record in letters:
        try:
            letter = letter_of(record)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            summary.unreadable += 1
            continue
        if (reason is not None and letter.reason != reason) or not in_range(record):
            summary.filtered[letter.reason] += 1
        elif not letter.kept:
            summary.not_kept += 1
        elif letter.where in done:
            summary.already[letter.reason] += 1
        else:
            todo.append(letter)
    producer = kafka.producer(settings.kafka_bootstrap, transactional_id=f"{settings.app_id}-redrive-{dlq}",
                              request_timeout_ms=30000)
    try:
        await producer.start()
        for first in range(0, len(todo), BATCH):
            batch = todo[first:first + BATCH]
            async with producer.transaction():
                for letter in batch:
                    await producer.send(letter.topic, letter.value, key=letter.key,
                                        headers=[(REDRIVE_OF, letter.where.encode())])
                    await producer.send(markers, orjson.dumps({"topic": letter.topic, "reason_code": letter.reason}),
                                        key=letter.where.encode())
            for letter in batch:
                summary.redriven[letter.reason] += 1
            if progress is not None:
                progress(len(batch))
    except KafkaError as e:
        raise KafkaUnavailable(f"redrive of {dlq} stopped ({kafka.reason(e)}); "
                               f"{sum(summary.redriven.values())} redriven so far; run it again to go on") from None
    finally:
        await producer.stop()
    return summary
