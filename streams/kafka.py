"""Every Kafka client tribunal makes outside Faust's own, made here.

One place for what every client shares (the bootstrap servers today; security settings, when they
come, are added here once) and for tribunal's defaults: producers are idempotent, consumers read
committed records only and never commit offsets of their own (tribunal's readers follow topics,
they are not consumer groups). Faust's clients take their settings from `streams.worker.app`.
"""

from __future__ import annotations

from typing import Any

FETCH_WAIT_MS = 100
"""How long the broker may hold a worker's fetch for data. A broker answers one connection's requests in
order, so an offset lookup sent behind a held fetch waits for it: with Faust's 1.5 s a restart's recovery
spent seconds so (streams.worker.faust_private, `fetch_without_long_waits`). A busy consumer never waits: a
fetch returns as soon as there is a record."""


def producer(bootstrap: str, **options: Any) -> Any:
    """An idempotent `AIOKafkaProducer` (not started)."""
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(bootstrap_servers=bootstrap, **{"enable_idempotence": True, **options})


def consumer(bootstrap: str, *topics: str, **options: Any) -> Any:
    """A read_committed `AIOKafkaConsumer` outside any group, committing nothing (not started)."""
    from aiokafka import AIOKafkaConsumer

    defaults = {"group_id": None, "isolation_level": "read_committed", "enable_auto_commit": False}
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, **{**defaults, **options})


def admin(bootstrap: str, **options: Any) -> Any:
    """An `AIOKafkaAdminClient` (not started)."""
    from aiokafka.admin import AIOKafkaAdminClient

    return AIOKafkaAdminClient(bootstrap_servers=bootstrap, **options)
