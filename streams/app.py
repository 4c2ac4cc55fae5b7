"""The Faust application: one agent folds every input topic of a pool through `streams.core.pool`.

`create_app(settings)` builds a fresh app, so the CLI, the tests and the benchmarks each get one
configured for their own broker, topic prefix and data directory.

Exactly-once, and what holds it together:
* The four input topics are co-partitioned (same partition count, key = pool), so one pool lives
  in one partition of each, and one agent instance owns it.
* Two tables keyed by pool (RocksDB locally, changelog topics in Kafka): `pool-policies`,
  written when a policy record applies, and `pool-state`, written for every record. The state
  holds the last input offset applied per topic, so a redelivered record yields nothing.
* A record's outputs and changelog writes go out as one unit in the Kafka transaction that also
  commits input offsets (see `streams.agents.emit` for the two Faust gaps this closes), so a
  read_committed consumer sees a decision exactly when its input counts as consumed.
* Under exactly-once the local RocksDB files are discarded at start-up: a SIGKILLed worker may
  have written state there that its aborted transaction never committed. Recovery re-reads the
  compacted changelogs read_committed, which hold only committed state (Kafka Streams likewise
  wipes EOS state stores after an unclean shutdown).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import faust
from aiohttp.web import Response

from streams.agents.continuity import Continuity
from streams.agents.emit import commit_effects
from streams.agents.watchdog import Watchdog
from streams.core import pool, snapshot
from streams.core.deadletter import Rejected
from streams.core.intake import pool_of
from streams.core.source import SourceRecord
from streams.settings import Settings

log = logging.getLogger(__name__)


def _store() -> str:
    # RocksDB (through rocksdict) keeps table state on disk; memory is the fallback Faust offers.
    return "rocksdb://" if importlib.util.find_spec("rocksdict") else "memory://"


def source_record(event: Any) -> SourceRecord:
    m = event.message
    return SourceRecord(topic=m.topic, partition=m.partition, offset=m.offset,
                        timestamp=round(m.timestamp * 1000) if m.timestamp else 0,
                        key=m.key, value=m.value)


def discard_local_tables(app: faust.App) -> None:
    """Remove the worker's local table files so that recovery comes from the changelogs alone."""
    tables = Path(app.conf.tabledir)
    if tables.exists():
        shutil.rmtree(tables)
        log.info("discarded local table files in %s; recovering from the changelogs", tables)


def create_app(settings: Settings) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        store=_store(),
        datadir=str(settings.data_dir),
        processing_guarantee=settings.processing_guarantee,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        web_enabled=True,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        web_host=settings.web_host,
        consumer_auto_offset_reset="earliest",
        table_standby_replicas=0,
        broker_commit_interval=settings.commit_interval,
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=min(3.0, settings.session_timeout / 3),
        broker_rebalance_timeout=max(30.0, settings.session_timeout),
        producer_linger=settings.linger,
        consumer_group_instance_id=settings.instance_id
        or f"{settings.app_id}-{socket.gethostname()}-{settings.web_port}",
    )
    names = {settings.topic(t): t for t in pool.INPUTS}
    inputs = app.topic(*names, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
                       partitions=settings.partitions)
    policies = app.Table("pool-policies", key_type=str, partitions=settings.partitions)
    states = app.Table("pool-state", key_type=str, partitions=settings.partitions)
    cache: dict[str, tuple[Any, pool.PoolState]] = {}
    progress = Progress()

    def current(key: str) -> pool.PoolState:
        """The pool's state: the decoded copy in memory while the table still holds what it was made from."""
        stored = states.get(key)
        hit = cache.get(key)
        if hit is not None and hit[0] == (stored or {}).get("offsets"):
            return hit[1]
        return snapshot.load(policies.get(key), stored)

    continuity = Continuity(app, settings.kafka_bootstrap)

    @app.agent(inputs, name="pools")
    async def fold(stream: Any) -> None:
        async for event in stream.events():
            if not await continuity.admit(event):
                continue
            record = source_record(event)
            key = pool_of(record)
            try:
                before = current(key)
            except Exception as exc:  # an unreadable table entry: report the record, keep the entry
                log.exception("cannot load the state of pool %r", key)
                _, outputs = pool.reject(pool.PoolState(), record, Rejected("state_unreadable", repr(exc)))
                await commit_effects(app, settings, event, [], outputs)
                continue
            try:
                after, outputs = pool.apply(before, record, names[record.topic])
            except Exception as exc:  # a bug must cost one record, not the worker
                log.exception("fold failed on %s[%s]@%s", record.topic, record.partition, record.offset)
                after, outputs = pool.reject(before, record, Rejected("internal_error", repr(exc)))
            writes = []
            if after is not before:
                if snapshot.policies_changed(before, after):
                    writes.append((policies, key, snapshot.dump_policies(after)))
                dumped = snapshot.dump_state(after)
                writes.append((states, key, dumped))
                cache[key] = (dumped["offsets"], after)
            await commit_effects(app, settings, event, writes, outputs)
            progress.count(record)

    @app.timer(10.0)
    async def report_progress() -> None:
        progress.report()

    watchdog = Watchdog(app, settings.kafka_bootstrap, set(names), settings.stall_timeout)

    @app.timer(5.0)
    async def watch_for_stalls() -> None:
        await watchdog.check()

    @app.page("/pools/{pool_id}/")
    @app.table_route(table=states, match_info="pool_id")
    async def pool_view(web: Any, request: Any, pool_id: str) -> Response:
        stored = states.get(pool_id)
        if stored is None:
            return web.json({"pool": pool_id, "error": "no such pool"}, status=404)
        return web.json(describe(pool_id, snapshot.load(policies.get(pool_id), stored)))

    return app


class Progress:
    """A log line every 10 s while records flow: how many, how fast, and the last one folded."""

    def __init__(self) -> None:
        self.total = 0
        self.reported = 0
        self.last: SourceRecord | None = None
        self.since = time.monotonic()

    def count(self, record: SourceRecord) -> None:
        self.total += 1
        self.last = record

    def report(self) -> None:
        now = time.monotonic()
        if self.total != self.reported and self.last is not None:
            rate = (self.total - self.reported) / (now - self.since)
            log.info("folded %d records (%.0f/s); last %s[%d]@%d", self.total, rate, self.last.topic,
                     self.last.partition, self.last.offset)
        self.reported, self.since = self.total, now


def describe(pool_id: str, state: pool.PoolState) -> dict[str, Any]:
    """What `tribunal state` shows: a pool as an operator reads it."""
    out: dict[str, Any] = {"pool": pool_id, "seqs": dict(state.seqs), "offsets": dict(state.offsets)}
    if state.decider is not None:
        d = state.decider
        out["decider"] = {
            "policy_version": d.policy.version, "capacity": d.capacity, "free": d.free,
            "apps": [{"app": r.name, "priority": r.priority, "min": r.min_num, "max": r.max_num,
                      "instances": d.instances[r.key], "metrical": d.metricals[r.key],
                      "idle": r.key in d.idle} for r in d.policy.rules]}
    if state.justice is not None:
        j = state.justice
        out["justice"] = {"policy_version": j.policy.version, "driver": j.policy.driver,
                          "targets": {j.policy.apps[k]: v for k, v in j.targets.items()}}
    return out
