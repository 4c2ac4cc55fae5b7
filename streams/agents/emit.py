"""Writing one record's effects, state and outputs, as one unit inside the Kafka transaction.

Faust's exactly-once mode opens one transactional producer per assigned source partition and
commits the consumed offsets through it. Two gaps in it were measured here (tests/agents/
test_crash.py, SIGKILL under load), and this module closes both:

* `Topic.send` to a topic the app does not consume picks no transactional id and goes out
  *outside* any transaction (faust-streaming#177; seen here: output partitions carried no commit
  markers). Outputs are therefore sent with the transactional id of the source partition.
* A table's changelog write is queued in Faust's producer buffer and sent later by a background
  task, so the offset commit can fall between a record's outputs and its state: after a crash the
  outputs were committed while the state that remembers them was not, and the redelivered record
  was decided a second time (duplicates by cause, seen in the crash test).

So the worker sets table values in the local store only and sends the changelog records itself,
together with the outputs, while holding the lock Faust takes around its commit for that
transactional id: all of one input's effects land in the same transaction, or none do. A record
redelivered after a commit that covered its effects but not its offset is recognised by the last
input offset kept in the pool state, and yields nothing.

This reaches into two private attributes of faust-streaming 0.15's aiokafka producer
(`_transaction_producers`, `_trn_locks`) through `streams.agents.faust_private`, whose start-up
check fails the worker, loudly, if a Faust upgrade moves them. (`App.in_transaction` is a
cached property that is False until the worker runs: nothing may read it before.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streams.agents import faust_private
from streams.agents.routing import Send
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


async def commit_effects(app: Any, settings: Settings, event: Any, writes: Iterable[tuple[Any, str, Any]],
                         outputs: list[Emit], source_topic: str | None = None, sends: Iterable[Send] = ()) -> None:
    """Apply `writes` (table, key, value) and send their changelog records, `outputs` and `sends` as one unit.

    `source_topic` is the topic the folded record was written to (its dead letters go to that
    topic's `.dlq`); it differs from the event's topic for a record forwarded to its key's partition.
    """
    partition = event.message.partition
    records: list[Send] = []
    for table, key, value in writes:
        table.data[key] = value  # the local store only: the changelog record is sent below
        records.append(Send(table.changelog_topic.get_topic_name(), *faust_private.encoded(table, key, value),
                            partition))
    source = source_topic or event.message.topic
    records.extend(Send(topic_for(settings, emit, source), emit.key.encode("utf-8"), emit.value_bytes())
                   for emit in outputs)
    records.extend(sends)
    tid = transactional_id(app, event)
    if tid is None:
        for r in records:
            await app.producer.send(r.topic, r.key, r.value, r.partition,
                                    None if r.timestamp_ms is None else r.timestamp_ms / 1000, r.headers)
        return
    lock, transaction = faust_private.transaction_producer(app.producer, tid)
    async with lock:
        for r in records:
            await transaction.send(r.topic, r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp_ms,
                                   headers=r.headers)
