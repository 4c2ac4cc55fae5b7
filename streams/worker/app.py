"""The Faust application: one agent, one keeper and one state page per fold of `streams.core.folds`.

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
  commits input offsets (see `streams.worker.checkpoint` for the two Faust gaps this closes), so a
  read_committed consumer sees a decision exactly when its input counts as consumed.
* Recovery reads each changelog up to the broker's last stable offset (`streams.worker.faust_private`:
  Faust's own figure is unknown until a first fetch, and then recovery was silently skipped).
* The local RocksDB stores hold committed states only: a batch's states enter them after its
  transaction commits, with the changelog offsets they hold (`Checkpoint._keep`). So a restart,
  even after a SIGKILL, keeps them and recovery reads each changelog from that offset on, where
  Kafka Streams wipes an EOS store after an unclean shutdown (and KIP-892 makes its stores
  transactional for the same end). A store written otherwise (by an earlier version, which wrote
  states before their commit) or left untouched for `STALE_AFTER` is discarded at start, and its
  changelogs are read from the start (`keep_or_discard_local_tables`); so is one that claims an
  offset its changelog does not reach (`_restart_without_stores`).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import faust
from faust.web import Request, Response, View

from streams import kafka
from streams.core import folds
from streams.kafka import partition_for
from streams.pool_sizes import RECORD_LIMIT
from streams.settings import Settings
from streams.worker import faust_private, metrics
from streams.worker.agent import add_fold_agent
from streams.worker.checkpoint import Checkpoint
from streams.worker.continuity import Continuity
from streams.worker.keeper import Keeper
from streams.worker.unit import Progress
from streams.worker.watchdog import Watchdog, restart_if_fenced, restart_in_place

log = logging.getLogger(__name__)

PRODUCER_BATCH_BYTES = 512 * 1024
FORWARDED = "X-Tribunal-Forwarded"  # on a state request one worker passes to the key's owner


def _store() -> str:
    # RocksDB (through rocksdict) keeps table state on disk; memory is the fallback Faust offers.
    return "rocksdb://" if importlib.util.find_spec("rocksdict") else "memory://"


CHANGELOG_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.1"}
"""Changelogs the broker compacts soon. A restart reads a table's changelog to its end: Kafka only ever
compacts closed segments, and at its 1 GB segment a changelog written a few hundred times a second grew
for half an hour before any of it could be compacted, so a restart read every state the worker had
committed since (bench/restart.py: 1.7 s of reading after 15 s of running, 4.6 s after 90 s). With 1 MB
segments the broker's cleaner keeps each changelog near its live keys plus the last seconds of writes."""


def _table(app: faust.App, name: str, settings: Settings) -> Any:
    return app.Table(name, key_type=str, partitions=settings.partitions, options=rocksdb_options(),
                     extra_topic_configs=CHANGELOG_CONFIG)


def rocksdb_options() -> dict[str, int]:
    """Small RocksDB buffers: a table holds one entry per pool or group, read from RocksDB only after a
    restart (the keepers cache states in memory), so Faust's defaults (64 MB memtables, up to three
    per partition's database, a 2 GB block cache) only let the worker's RSS grow with the records
    written (measured: 92 -> 211 MB over a million records). A fresh dict per table: Faust's store
    pops keys from the one it is given."""
    return {"write_buffer_size": 2 << 20, "max_write_buffer_number": 2, "target_file_size_base": 8 << 20,
            "block_cache_size": 8 << 20}


COMMITTED_ONLY = ".committed-states-only"  # in a table directory whose stores hold committed states only
STALE_AFTER = 3_600.0  # seconds: a store untouched longer is not trusted (see `keep_or_discard_local_tables`)


def keep_or_discard_local_tables(app: faust.App, now: float) -> bool:
    """Keep the worker's local stores for recovery to start from, or remove them so that it reads the changelogs
    from the start (True: removed). Removed when not marked as holding committed states only, or when nothing in
    them changed for `STALE_AFTER` seconds before `now` (wall clock): a compacted changelog drops a deleted key's
    tombstone after `delete.retention.ms` (a day by default), and a store older than that could keep a key that
    its changelog no longer says was deleted."""
    tables = Path(app.conf.tabledir)
    mark = tables / COMMITTED_ONLY
    discard = tables.exists() and any(tables.iterdir()) and (
        not mark.exists() or now - max(f.stat().st_mtime for f in tables.rglob("*")) > STALE_AFTER)
    if discard:
        shutil.rmtree(tables)
        log.info("discarded local table files in %s (%s); recovering from the changelogs' start", tables,
                 "written before states were kept only once committed" if not mark.exists() else
                 f"untouched for over {STALE_AFTER:g} s")
    tables.mkdir(parents=True, exist_ok=True)
    mark.touch()
    return discard


def _restart_without_stores(app: faust.App, ahead: Mapping[tuple[str, int], tuple[int, int]]) -> None:
    """Stores claim offsets their changelogs do not have (`faust_private.distrust_stores_ahead_of_their_changelogs`):
    what they hold came from another history of those topics, or from a commit whose markers are not written yet.
    Either way they cannot be trusted: unmarked, they are discarded at the next start, which comes at once."""
    log.error("local stores ahead of their changelogs (%s): discarding them and starting again",
              ", ".join(f"{t}[{p}] stored {stored}, changelog to {end}" for (t, p), (stored, end) in ahead.items()))
    (Path(app.conf.tabledir) / COMMITTED_ONLY).unlink(missing_ok=True)
    restart_in_place()


def create_app(settings: Settings) -> faust.App:
    faust_private.check()
    faust_private.ask_the_broker_for_highwaters()
    faust_private.recover_past_aborted_transactions_soon()
    faust_private.recover_from_the_start_when_unsure()
    faust_private.commit_transactions_at_once(restart_if_fenced)  # a zombie's commit: it says so and rejoins
    faust_private.retry_transactions_soon()
    faust_private.deliver_as_the_worker()
    faust_private.commit_without_a_table()
    faust_private.recover_without_a_pause()
    faust_private.assign_topics_missing_from_metadata()
    faust_private.rejoin_when_the_group_is_rebalancing()
    faust_private.start_transactions_at_once()
    faust_private.skip_autodiscovery_marks()
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # Faust makes only the last level (a fresh checkout has no
    # .tribunal/ until `infra up` runs, and a worker on a broker elsewhere never runs it)
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        broker_credentials=kafka.faust_credentials(settings),
        store=_store(),
        datadir=str(settings.data_dir),
        processing_guarantee=settings.processing_guarantee,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_disable_leader=True,  # no leader-only timers: no `__assignor-__leader` topic to make and assign
        # Every topic, changelogs too, is made before Faust starts (`streams.worker.run`), with retries while a
        # broker is lost; Faust's own CreateTopics at each table's start goes to any broker, and a lost one's
        # "node not ready" stopped a worker started then (tests/test_combined_faults.py).
        topic_allow_declare=False,
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
        producer_max_request_size=RECORD_LIMIT,
        consumer_group_instance_id=settings.instance_id
        or f"{settings.app_id}-{socket.gethostname()}-{settings.web_port}",
    )
    faust_private.fetch_briefly_while_recovering(app, kafka.FETCH_WAIT_MS)
    faust_private.distrust_stores_ahead_of_their_changelogs(lambda found: _restart_without_stores(app, found))
    progress = Progress()
    continuity = Continuity(app, settings.kafka_bootstrap)
    faust_private.end_recovery_only_when_read(app, continuity.first_offsets_from)
    keepers = [Keeper[Any](fold, [_table(app, t.name, settings) for t in fold.tables],
                           [_table(app, p.name, settings) for p in fold.parts]) for fold in folds.FOLDS]
    checkpoint = Checkpoint(app, settings, continuity, keepers, settings.max_batch, settings.commit_interval,
                            tally=metrics.Tally() if settings.metrics else metrics.Off())
    app.task(checkpoint.run)

    watchdog = Watchdog(app, settings.kafka_bootstrap, set(), settings.stall_timeout, continuity.first_offset_from)

    @app.on_partitions_revoked.connect
    async def settle(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        watchdog.guard_joins()  # from the first join on: Faust's timers start only after the first recovery
        await checkpoint.settle()

    @app.on_partitions_assigned.connect
    async def resume(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        checkpoint.resume()

    inputs: set[str] = set()
    for keeper in keepers:
        inputs |= add_fold_agent(app, settings, keeper, checkpoint, progress)
        add_state_page(app, keeper, settings.partitions)

    @app.timer(10.0)
    async def report_progress() -> None:
        progress.report()

    watchdog.inputs |= inputs

    @app.timer(5.0)
    async def watch_for_stalls() -> None:
        await watchdog.check()

    add_metrics_page(app, checkpoint, continuity, inputs, keepers)

    @app.page("/checkpoint/")
    async def checkpoint_stats(web: View, request: Request) -> Response:
        """Where this worker's time went: records, batches, seconds folding, writing, committing."""
        return web.json(checkpoint.stats.as_dict())

    return app


def add_metrics_page(app: faust.App, checkpoint: Checkpoint, continuity: Continuity, inputs: set[str],
                     keepers: list[Keeper[Any]]) -> None:
    """`/metrics`: the worker's counts, latencies and lag for Prometheus (`streams.worker.metrics`), and the
    process's CPU and memory."""
    from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

    lags: dict[tuple[str, int], int] = {}

    async def measure_lag() -> None:
        """Each assigned input partition's end (the broker's last stable offset, asked now) less the next offset
        to commit; a partition with nothing done since the last rebalance is measured from its committed offset.
        A transactional topic (the repartition topics) ends in a commit marker, so at rest it shows 1."""
        lags.clear()
        try:
            tps = [tp for tp in app.consumer.assignment() if tp.topic in inputs]
            if not tps:
                return
            ends = await app.consumer.highwaters(*tps)
            done = continuity.done_offsets()
            missing = [tp for tp in tps if (tp.topic, tp.partition) not in done]
            committed = await continuity.sideband.committed(app.conf.id, missing, patience=5) if missing else {}
        except Exception as e:  # noqa: BLE001 - not started, rebalancing, a broker away: no lag this scrape
            log.debug("no consumer lag this scrape: %r", e)
            return
        for tp in tps:
            start = done.get((tp.topic, tp.partition), committed.get(tp))
            if start is not None and ends.get(tp) is not None:
                lags[(tp.topic, tp.partition)] = max(0, ends[tp] - start)

    def states() -> list[tuple[Any, str, Any]]:
        return [(k.fold, key, state) for k in keepers if k.fold.gauges is not None
                for key, state in list(k.cache.items())]

    registry = CollectorRegistry()
    registry.register(metrics.Collector(checkpoint.tally, lambda: lags, lambda: continuity.refetches, states))
    ProcessCollector(registry=registry)

    @app.page("/metrics")
    async def metrics_page(web: View, request: Request) -> Response:
        await measure_lag()
        return web.text(generate_latest(registry).decode(), content_type="text/plain")


def add_state_page(app: faust.App, keeper: Keeper[Any], partitions: int) -> None:
    """`/{fold}/{key}/`: one key's state as JSON (the fold's `describe`), answered by whichever worker holds it;
    `/{fold}/{key}/{name}/`: one named thing in it (a dispatcher's job by uuid), for a fold with `item`."""
    fold = keeper.fold

    @app.page(f"/{fold.name}/{{key}}/")
    async def view(web: View, request: Request, key: str) -> Response:
        elsewhere = await _at_owner(app, keeper, key, partitions, web, request)
        if elsewhere is not None:
            return elsewhere
        if not keeper.exists(key):
            return web.json({"key": key, "error": f"no such key in {fold.name}"}, status=404)
        return web.json(fold.describe(key, keeper.load(key)))

    item = fold.item
    if item is None:
        return

    @app.page(f"/{fold.name}/{{key}}/{{name}}/")
    async def item_view(web: View, request: Request, key: str, name: str) -> Response:
        elsewhere = await _at_owner(app, keeper, key, partitions, web, request)
        if elsewhere is not None:
            return elsewhere
        found = item(keeper.load(key), name) if keeper.exists(key) else None
        if found is None:
            return web.json({"key": key, "name": name, "error": f"no {name!r} in {fold.name} {key!r}"}, status=404)
        return web.json(found)


async def _at_owner(app: faust.App, keeper: Keeper[Any], key: str, partitions: int, web: View,
                    request: Request) -> Response | None:
    """The owning worker's answer to `request`, or None if this worker owns `key`.

    Not Faust's `table_route`: it finds a key's partition by hashing the key as the table
    serializes it (JSON, quoted), while tribunal places a key by the bytes producers send
    (`kafka.partition_for`); with more than one worker it asked the wrong one."""
    owner = faust_private.owner_of(app, keeper.tables[0], partition_for(key, partitions))
    if owner is None or app.rebalancing:  # a recovering partition's state would look absent
        return web.json({"key": key, "error": "the group is rebalancing; ask again"}, status=503)
    if owner == faust_private.owner_of_self(app):
        return None
    if request.headers.get(FORWARDED):  # two workers that disagree on the owner would forward forever
        return web.json({"key": key, "error": "the workers disagree on the key's owner; ask again"}, status=503)
    url = request.url.with_scheme("http").with_host(owner[0]).with_port(owner[1])
    try:
        async with app.http_client.get(url, headers={FORWARDED: "1"},
                                       timeout=aiohttp.ClientTimeout(total=10)) as response:
            return web.text(await response.text(), content_type=response.content_type, status=response.status)
    except (TimeoutError, aiohttp.ClientError) as e:  # the owner died and the group has not noticed yet
        return web.json({"key": key, "error": f"the owner {owner[0]}:{owner[1]} does not answer ({e!r})"}, status=503)
