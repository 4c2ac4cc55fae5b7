"""The Faust application: topics, tables and agents wired to the pure core.

`create_app(settings)` builds a fresh app, so the CLI, the tests and the benchmarks each get one
configured for their own broker, topic prefix and data directory.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from typing import Any

import faust

from streams.agents.emit import send_outputs
from streams.core import intake
from streams.core.deadletter import Rejected
from streams.core.source import SourceRecord
from streams.settings import Settings
from streams.topics import METRIC_CHANNELS

log = logging.getLogger(__name__)


def _store() -> str:
    # RocksDB (through rocksdict) keeps table state on disk; memory is the fallback Faust offers.
    return "rocksdb://" if importlib.util.find_spec("rocksdict") else "memory://"


def source_record(event: Any) -> SourceRecord:
    m = event.message
    return SourceRecord(topic=m.topic, partition=m.partition, offset=m.offset,
                        timestamp=int(m.timestamp * 1000) if m.timestamp else 0,
                        key=m.key, value=m.value)


def create_app(settings: Settings) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        store=_store(),
        datadir=str(settings.data_dir),
        processing_guarantee=settings.processing_guarantee,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=True,
        web_enabled=True,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        web_host=settings.web_host,
        consumer_auto_offset_reset="earliest",
        table_standby_replicas=0,
    )
    for channel in METRIC_CHANNELS:
        _intake_agent(app, settings, channel)
    return app


def _intake_agent(app: faust.App, settings: Settings, channel: str) -> None:
    topic = app.topic(settings.topic(channel), key_type=bytes, value_type=bytes,
                      key_serializer="raw", value_serializer="raw", partitions=settings.partitions)
    table = app.Table(f"intake-{channel}", key_type=str, partitions=settings.partitions)

    async def fold(stream: Any) -> None:
        async for event in stream.events():
            record = source_record(event)
            pool = intake.pool_of(record)
            stored = table.get(pool)
            state = intake.IntakeState(**stored) if stored else intake.IntakeState()
            try:
                state, outputs = intake.apply(state, record, channel)
            except Exception as exc:  # a bug must cost one record, not the worker
                log.exception("intake failed on %s[%s]@%s", record.topic, record.partition, record.offset)
                state, outputs = intake.reject(state, record, Rejected("internal_error", repr(exc)))
            table[pool] = dataclasses.asdict(state)
            await send_outputs(app, settings, event, outputs)

    fold.__name__ = f"intake_{channel}"
    fold.__qualname__ = fold.__name__
    app.agent(topic, name=f"intake-{channel}")(fold)
