"""The Faust application: one agent per fold of `streams.core.folds` (pools, scheduler groups).

`create_app(settings)` builds a fresh app, so the CLI, the tests and the benchmarks each get one
configured for their own broker, topic prefix and data directory.

Exactly-once, and what holds it together:
* A fold's input topics are co-partitioned (same partition count, key = pool or group), so one
  key lives in one partition of each, and one agent instance owns it.
* Tables keyed by pool or group (RocksDB locally, changelog topics in Kafka): `pool-policies`,
  written when a policy record applies, `pool-state` and `group-state`, written once per batch
  for each key that changed. A state holds the last input offset applied per topic partition, so a
  redelivered record yields nothing.
* A record's outputs and changelog writes go out as one unit in the Kafka transaction that also
  commits input offsets (see `streams.agents.checkpoint` for the two Faust gaps this closes), so a
  read_committed consumer sees a decision exactly when its input counts as consumed.
* Recovery reads each changelog up to the broker's last stable offset (`streams.agents.faust_private`:
  Faust's own figure is unknown until a first fetch, and then recovery was silently skipped).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faust
from aiohttp.web import Response

from streams.agents import faust_private, routing
from streams.agents.checkpoint import Checkpoint, Keeper
from streams.agents.continuity import Continuity
from streams.agents.watchdog import Watchdog
from streams.core import folds, limits, pool, snapshot
from streams.core.deadletter import Rejected
from streams.core.source import SourceRecord, record_key
from streams.settings import Settings
from streams.views import describe, describe_group

log = logging.getLogger(__name__)

PRODUCER_BATCH_BYTES = 512 * 1024


def _store() -> str:
    # RocksDB (through rocksdict) keeps table state on disk; memory is the fallback Faust offers.
    return "rocksdb://" if importlib.util.find_spec("rocksdict") else "memory://"


def _table(app: faust.App, name: str, settings: Settings) -> Any:
    return app.Table(name, key_type=str, partitions=settings.partitions, options=rocksdb_options())


def rocksdb_options() -> dict[str, int]:
    """Small RocksDB buffers: a table holds one entry per pool or group, read from RocksDB only after a
    restart (the keepers cache states in memory), so Faust's defaults (64 MB memtables, up to three
    per partition's database, a 2 GB block cache) only let the worker's RSS grow with the records
    written (measured: 92 -> 211 MB over a million records). A fresh dict per table: Faust's store
    pops keys from the one it is given."""
    return {"write_buffer_size": 2 << 20, "max_write_buffer_number": 2, "target_file_size_base": 8 << 20,
            "block_cache_size": 8 << 20}


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
    faust_private.check()
    faust_private.ask_the_broker_for_highwaters()
    faust_private.commit_transactions_at_once()
    faust_private.retry_transactions_soon()
    faust_private.deliver_without_tasks()
    faust_private.fetch_while_streams_are_full()
    faust_private.commit_without_a_table()
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
        broker_commit_interval=1.0,  # a fallback: the checkpoint commits after every batch
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=min(3.0, settings.session_timeout / 3),
        broker_rebalance_timeout=max(30.0, settings.session_timeout),
        producer_linger=settings.linger,
        # A batch's records for one partition go out as one aiokafka record batch; at Faust's 16 KB a
        # flush of a few hundred decisions was many batches, each waiting for the one before it to be
        # acknowledged (measured: most of the write time). The broker takes up to 1 MB a batch.
        producer_max_batch_size=PRODUCER_BATCH_BYTES,
        producer_max_request_size=2 * PRODUCER_BATCH_BYTES,
        consumer_group_instance_id=settings.instance_id
        or f"{settings.app_id}-{socket.gethostname()}-{settings.web_port}",
    )
    progress = Progress()
    continuity = Continuity(app, settings.kafka_bootstrap)
    pools = PoolKeeper(_table(app, "pool-policies", settings), _table(app, "pool-state", settings))
    groups = GroupKeeper(_table(app, "group-state", settings))
    checkpoint = Checkpoint(app, settings, continuity, [pools, groups], settings.max_batch, settings.commit_interval)
    app.task(checkpoint.run)
    inputs: set[str] = set()
    for fold, keeper in ((folds.POOLS, pools), (folds.GROUPS, groups)):
        inputs |= add_fold_agent(app, settings, fold, keeper, checkpoint, progress)

    @app.timer(10.0)
    async def report_progress() -> None:
        progress.report()

    watchdog = Watchdog(app, settings.kafka_bootstrap, inputs, settings.stall_timeout, continuity.first_offset_from)

    @app.timer(5.0)
    async def watch_for_stalls() -> None:
        await watchdog.check()

    @app.page("/checkpoint/")
    async def checkpoint_stats(web: Any, request: Any) -> Response:
        """Where this worker's time went: records, batches, seconds folding, writing, committing."""
        return web.json(checkpoint.stats.as_dict())

    add_state_page(app, "pools", pools, describe)
    add_state_page(app, "groups", groups, describe_group)

    return app


class CachedKeeper:
    """A fold's decoded states in memory, read from the table once per key and assignment.

    The cache is the state of record while folding: the table and its changelog receive a key's
    state once per batch (`writes`, called by the checkpoint). After a rebalance the checkpoint
    makes it `forget`, and states are read again from the tables recovery rebuilt.
    """

    def __init__(self, states: Any) -> None:
        self.states = states
        self.cache: dict[str, Any] = {}

    def decode(self, key: str, stored: Any) -> Any:
        raise NotImplementedError

    def writes(self, key: str) -> list[tuple[Any, str, Any]]:
        """(table, key, value) for each table entry that stores `key`'s current state."""
        raise NotImplementedError

    def load(self, key: str) -> Any:
        state = self.cache.get(key)
        if state is None:
            state = self.cache[key] = self.decode(key, self.states.get(key))
        return state

    def keep(self, key: str, before: Any, after: Any) -> None:
        self.cache[key] = after

    def forget(self) -> None:
        self.cache.clear()


class PoolKeeper(CachedKeeper):
    """A pool's state in two tables: policies (written when one applies) and the per-record state."""

    def __init__(self, policies: Any, states: Any) -> None:
        super().__init__(states)
        self.policies = policies
        self.new_policies: set[str] = set()

    def decode(self, key: str, stored: Any) -> pool.PoolState:
        return snapshot.load(self.policies.get(key), stored)

    def keep(self, key: str, before: pool.PoolState, after: pool.PoolState) -> None:
        super().keep(key, before, after)
        if snapshot.policies_changed(before, after):
            self.new_policies.add(key)

    def writes(self, key: str) -> list[tuple[Any, str, Any]]:
        state = self.cache[key]
        out = []
        if key in self.new_policies:
            self.new_policies.discard(key)
            out.append((self.policies, key, snapshot.dump_policies(state)))
        out.append((self.states, key, snapshot.dump_state(state)))
        return out

    def forget(self) -> None:
        super().forget()
        self.new_policies.clear()


class GroupKeeper(CachedKeeper):
    """A scheduler group's state in one table, its jobs and their owners included."""

    def decode(self, key: str, stored: Any) -> limits.GroupState:
        return limits.load(stored)

    def writes(self, key: str) -> list[tuple[Any, str, Any]]:
        return [(self.states, key, limits.dump(self.cache[key]))]


def add_state_page(app: faust.App, scope: str, keeper: CachedKeeper,
                   describe_one: Callable[[str, Any], dict[str, Any]]) -> None:
    """`/{scope}/{key}/`: one key's state as JSON, answered by whichever worker holds the key."""
    @app.page(f"/{scope}/{{key}}/")
    @app.table_route(table=keeper.states, match_info="key")
    async def view(web: Any, request: Any, key: str) -> Response:
        if key not in keeper.cache and keeper.states.get(key) is None:
            return web.json({"key": key, "error": f"no such {scope[:-1]}"}, status=404)
        return web.json(describe_one(key, keeper.load(key)))


def add_fold_agent(app: faust.App, settings: Settings, fold: folds.Fold, keeper: Keeper,
                   checkpoint: Checkpoint, progress: Progress) -> set[str]:
    """One agent folding every input topic of `fold` and its repartition topic; returns the topic names read.

    The agent folds in memory and hands each record's effects to the checkpoint, which writes and
    commits them in batches (`streams.agents.checkpoint`). A record whose key (`fold.key_of`) maps
    to another partition than the one it arrived on is forwarded to that partition of the
    repartition topic and folded when it arrives there (`streams.agents.routing`), so one key's
    state lives in one place whoever produced the record.
    """
    names = {settings.topic(t): t for t in fold.inputs}
    repartition = settings.topic(fold.repartition)
    partitions = settings.partitions
    topic = app.topic(*names, repartition, key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw", partitions=partitions)
    continuity = checkpoint.continuity

    def handle(event: Any) -> None:
        m = event.message
        record = source_record(event)
        if m.topic == repartition:
            try:
                record = routing.original(record.topic, m.partition, m.offset, m.key, m.value, m.headers)
            except routing.NotForwarded as exc:  # not ours: say so, touch no state
                log.error("%s", exc)
                _, outputs = fold.reject(fold.empty(), record, Rejected("not_forwarded", str(exc)), record_key(record))
                checkpoint.add(event, outputs)
                return
        logical = names.get(record.topic, record.topic)
        key = fold.key_of(record, logical)
        home = routing.partition_for(key, partitions)
        if m.topic != repartition and home != m.partition:
            checkpoint.add(event, sends=[routing.forward(record, key, repartition, home)])
            progress.count(record, forwarded=True)
            return
        try:
            before = keeper.load(key)
        except Exception as exc:  # an unreadable table entry: report the record, keep the entry
            log.exception("cannot load the state of %s %r", fold.name, key)
            _, outputs = fold.reject(fold.empty(), record, Rejected("state_unreadable", repr(exc)), key)
            checkpoint.add(event, outputs, record.topic)
            return
        try:
            after, outputs = fold.apply(before, record, logical)
        except Exception as exc:  # a bug must cost one record, not the worker
            log.exception("fold failed on %s[%s]@%s", record.topic, record.partition, record.offset)
            after, outputs = fold.reject(before, record, Rejected("internal_error", repr(exc)), key)
        if after is before:
            checkpoint.add(event, outputs, record.topic)
        else:
            keeper.keep(key, before, after)
            checkpoint.add(event, outputs, record.topic, keeper=keeper, key=key)
        progress.count(record)

    stats = checkpoint.stats

    async def run(stream: Any) -> None:
        handled = time.perf_counter()
        async for event in stream.events():
            started = time.perf_counter()
            stats.waiting += started - handled
            if await continuity.admit(event) and await checkpoint.room():
                folding = time.perf_counter()
                stats.admit += folding - started
                checkpoint.follow_generation()
                handle(event)
                handled = time.perf_counter()
                stats.fold += handled - folding
            else:
                handled = time.perf_counter()

    app.agent(topic, name=fold.name)(run)
    return {*names, repartition}


class Progress:
    """A log line every 10 s while records flow: how many, how fast, and the last one folded."""

    def __init__(self) -> None:
        self.total = 0
        self.forwarded = 0
        self.reported = 0
        self.last: SourceRecord | None = None
        self.since = time.monotonic()

    def count(self, record: SourceRecord, forwarded: bool = False) -> None:
        """One record handled: folded, or forwarded to its key's partition (folded when it arrives there)."""
        self.total += 1
        self.forwarded += forwarded
        self.last = record

    def report(self) -> None:
        now = time.monotonic()
        if self.total != self.reported and self.last is not None:
            rate = (self.total - self.reported) / (now - self.since)
            log.info("handled %d records (%.0f/s; %d forwarded to their key's partition); last %s[%d]@%d",
                     self.total, rate, self.forwarded, self.last.topic, self.last.partition, self.last.offset)
        self.reported, self.since = self.total, now
