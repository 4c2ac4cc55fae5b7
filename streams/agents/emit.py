"""Writing a fold's outputs inside the transaction that commits its input.

Faust's exactly-once mode opens one transactional producer per assigned source partition and
commits the consumed offsets (and table changelog writes) through it, but `Topic.send` to a topic
the app does not consume picks no transactional id and goes out *outside* any transaction
(faust-streaming#177; seen here: output partitions carried no commit markers). So outputs are
sent with the transactional id of the source partition being processed, which puts them in the
same transaction as the offset commit: they become visible to read_committed consumers exactly
when the input counts as consumed.
"""

from __future__ import annotations

from typing import Any

from streams.core.deadletter import dlq_topic
from streams.core.outputs import DLQ, Emit
from streams.settings import Settings


def transactional_id(app: Any, event: Any) -> str | None:
    """The id of the producer whose transaction commits this event's offset (None without EOS)."""
    if not app.in_transaction:
        return None
    tp = event.message.tp
    group = app.assignor.group_for_topic(tp.topic)
    return f"{app.conf.id}-{group}-{tp.partition}"


def topic_for(settings: Settings, emit: Emit, source_topic: str) -> str:
    return dlq_topic(source_topic) if emit.stream == DLQ else settings.topic(emit.stream)


async def send_outputs(app: Any, settings: Settings, event: Any, outputs: list[Emit]) -> None:
    tid = transactional_id(app, event)
    for emit in outputs:
        await app.producer.send(
            topic_for(settings, emit, event.message.topic), emit.key.encode("utf-8"), emit.value_bytes(),
            None, None, None, transactional_id=tid,
        )
