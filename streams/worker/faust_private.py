"""Every touch of faust-streaming 0.15's private internals, in one module, checked at start-up.

Tribunal needs several things Faust does not offer publicly; each is written where it
is used (`streams.worker.checkpoint`, `streams.worker.continuity`, `streams.worker.app`), and each reaches
into Faust only through a function here, so a Faust upgrade means reading this one file:

* `transaction_producer`: a record's changelog writes and outputs are sent by the transactional
  producer of its source partition, under the lock Faust commits that producer under
  (`Producer._transaction_producers`, `_trn_locks`); at-least-once, by the aiokafka producer
  behind Faust's (`plain_producer`: `Producer._ensure_producer`), as whole record batches;
  `encoded` gives a table's key and value
  bytes as its changelog carries them (`Store._encode_key`, `_encode_value`); `keep_locally`
  sets table entries in the local store for a given event's partition from outside the agent
  (the RocksDB store takes the partition from Faust's current-event context variable,
  `faust.streams._current_event`), then the changelog offsets the store now holds
  (`Store.set_persisted_offset`, where recovery starts).
* `committed`: the checkpoint commits each source partition's transaction itself, offsets included
  (`streams.worker.checkpoint`), and tells Faust's consumer what it committed, as Faust's own commit does after its
  transactions (`Consumer._committed_offset`, `tables.on_commit`, the monitor), so that Faust's commit timer does
  not commit the same offsets again in a transaction of its own.
* `commit_only`: the offset Faust commits for a partition comes from the continuity guard, never
  from Faust's acknowledgements and gaps (`Consumer._new_offset`, `_add_gap`, `_gap`, `_acked`,
  `_acked_index`); `let_go` drops a message unacknowledged (`_unacked_messages`).
* `commit_transactions_at_once`: Faust commits its transactional producers (one per assigned
  source partition and agent) one after the other, each some round trips to the broker: 100-500
  ms per commit with eight of them, measured. They are independent, so they are committed
  together (`Producer.commit_transactions`, replaced for the whole process, same steps per id).
* `retry_transactions_soon`: right after a commit the broker answers the next transaction's
  offset commit with CONCURRENT_TRANSACTIONS until its markers are written (KAFKA-5477), and
  aiokafka retries that after `retry_backoff_ms`, 100 ms by default, which Faust does not let one
  set: every few commits took 110 ms instead of 10 (measured). Faust's transactional producers
  get 10 ms (`Producer._settings_extra`, wrapped).
* `deliver_without_tasks`: Faust's fetch loop (`Consumer._drain_messages`) hands each record to
  its streams through `Service.wait_first(deliver, suspend_flow.wait())`, which makes four tasks
  per record (the delivery and three events it races) and cancels three: 30% of a Faust agent's
  CPU, measured with py-spy on an agent that only counts. A delivery that finds room in the
  stream's queue completes without ever waiting, so its first step is run at once (as Python
  3.12's eager tasks do), and only a delivery that has to wait races the events as Faust does
  (`Consumer.wait_first`, replaced for the whole process).
* `fetch_while_streams_are_full`: when a stream's buffer passes 80% full, Faust takes the
  partition out of the set its fetch loop asks for (`Consumer.on_buffer_full`) and puts it back
  when the buffer has drained; but the loop's `getmany` is by then already waiting, for up to its
  fixed 1.0 s, on the old set, and when every busy partition had been taken out it waits out the
  whole second. Draining a backlog that stalled the worker for 0.5-1 s every few seconds
  (bench/drain.py: 9,438 records/s; 14,626 without). Partitions now stay in the set: a full
  buffer makes the delivery wait (Faust's own race in `wait_first`), which holds the fetch loop
  back without the stall (`Consumer.on_buffer_full`, replaced for the whole process).
* `fetch_busy_partitions_together`: aiokafka's fetcher keeps one fetch in flight per broker, and leaves out of it
  each partition whose fetched records the reader has not taken yet; once such records are older than its
  `prefetch_backoff` (0.1 s) it sends the fetch without them. Faust's fetch loop takes a fetch's records only
  after it has handed every record of the last one to its streams, so in a backlog the busy partitions' records
  waited past 0.1 s, and the fetch went out for the worker's idle topics alone (every fold's inputs, repartition
  topics and changelogs): the broker held it for Faust's 1.5 s (`fetch_max_wait_ms`) for want of data, and the
  busy partitions, read meanwhile, could not be fetched until it came back. The agents sat idle 1.0-1.5 s in
  each 20,000-record backlog (a probe of the fetcher: bench/e2e.py's "waiting for Faust's next record", about
  100 us a record, was this). A partition that Faust reads (the set it hands to `getmany`, which it keeps up to
  date as it pauses and resumes partitions) and whose fetched records are not all taken now holds its broker's
  next fetch back until they are, so the next fetch asks for every partition at once and returns as soon as any
  has data (`Fetcher._get_actions_per_node` and `fetched_records`, wrapped for the whole process).
* `commit_without_a_table`: before every offset commit Faust draws the offsets as a terminal table
  (`terminaltables`) for a log line at its `dev` level, drawn whether or not that level is
  logged: 5% of the worker's busy main thread at 1,000 records/s (py-spy). The table is now drawn
  only if the line is written (`faust.transport.consumer.terminal`, replaced in that module).
* `ask_the_broker_for_highwaters`: recovery must know how far each changelog goes. Under
  exactly-once Faust takes a changelog's highwater from aiokafka's `last_stable_offset(tp)`, known
  only after a first fetch; a worker that recovers before that gets None, reads it as an empty
  changelog and folds on from empty state (seen in CI: every group's seq started again at 1;
  upstream robinhood/aiokafka#7). A read_committed consumer's `end_offsets` asks the broker for
  the last stable offset, so that is what recovery uses (`AIOKafkaConsumerThread._highwaters`,
  replaced for the whole process).

* `recover_past_aborted_transactions_soon`: a SIGKILLed worker leaves an open transaction; the
  restarted one's producers abort it, so its changelog partitions end in aborted records and a
  marker that recovery, reading committed records only, never receives. Faust's recovery then ends
  only once its changelog queue has stayed empty for two waits of a fixed 5 s
  (`Recovery._slurp_changelogs`) and it finds every position at its highwater: a restart took 17-19
  s before deciding again at 1,000 records/s (bench/restart.py). The wait is now 0.05 s (0.2 s until
  issue 59: the two waits were 0.4 s of every restart), so the same check is made 100 times sooner
  (`faust.tables.recovery.asyncio`, replaced in that module by one whose `wait_for` shortens that wait
  alone); ending too soon is safe, since the check below (`end_recovery_only_when_read`) asks the broker
  whether anything committed is left to read.

* `start_transactions_at_once`: on an assignment Faust starts a transactional producer per assigned source
  partition one after the other (`TransactionManager._start_transactions`), each an InitProducerId round trip
  in which the coordinator also aborts what the producer's previous incarnation left open (after a SIGKILL: all
  of them): about 0.1 s each, 0.4 s of a restart with four partitions (bench/restart.py's worker log). They are
  independent, so they are started together (replaced for the whole process, the same call per id).

* `skip_autodiscovery_marks`: Faust marks each agent, task, service and page for venusian's autodiscovery
  (`faust.utils.venusian.attach`), which the worker never runs (no `autodiscover`); each mark reads its caller's
  source file through `inspect.getframeinfo`, about 0.05 s of a start (profiled). The marks are skipped.

* `recover_from_the_start_when_unsure`: recovery starts a changelog partition after the offset its
  store persisted, else (no offset stored: a store discarded at start, or a partition this worker
  never held) after whatever figure its in-memory `active_offsets` still held for it, left over from an
  earlier assignment, or written there by a check of an earlier generation that raced the
  rebalance ("dictionary changed size during iteration"). Then a partition that came back to a
  worker which held it before was counted as read to its highwater with nothing in its store:
  three workers with partitions moving away and back lost pools' policies
  (tests/worker/test_scale_out.py, `moving`). Without a stored offset it now reads from the start
  (`Recovery._add`, replaced for the whole process).
* `distrust_stores_ahead_of_their_changelogs`: a store whose persisted offset lies past its changelog's end (the
  topic deleted and made again, the data directory pointed at another cluster, a commit's markers not yet
  written) fails Faust's consistency check (`recovery_consistency_check`, `ConsistencyError`) and stops the
  worker, at every start. Recovery's offsets, once built (`Recovery._build_offsets`, wrapped for the whole
  process), are compared first, and the worker is told (it discards its stores and starts again).
* `end_recovery_only_when_read`: the same check (`detect_aborted_tx` in `_slurp_changelogs`,
  the only caller of the consumer's `position` in Faust) ends a changelog partition's recovery at
  its highwater once the consumer's position has reached it, taking the records in between for
  aborted ones. But the position moves when records are fetched, not applied, and Faust drops
  fetched records around rebalances (a stopped flow, a changed generation, a paused partition).
  The position is now reported as reached only when the side consumer finds no committed record
  between what recovery applied and the highwater; otherwise the partition is read again from the
  first such record (`ThreadDelegateConsumer.position`, replaced for the whole process, for the
  one app a worker process builds). A rebalance while the side consumer is asked makes the answer
  void. A partition kept across a rebalance whose store has no offset is read again from the
  start, as Faust would read a new one: correct, and the cost of a rebalance grows with the
  changelogs (compacted: with the live keys).

* `fetch_briefly_while_recovering`: Faust's consumer asks the broker to hold each fetch up to a
  fixed 1.5 s for data (`fetch_max_wait_ms=1500` in `AIOKafkaConsumerThread._create_worker_consumer`).
  A broker answers one connection's requests in order, so every offset lookup, and every fetch
  after a seek, waited behind such a held fetch: a restart's recovery spent 1.3-1.5 s on each of
  its highwater and earliest-offset lookups and more between its changelog fetches
  (bench/restart.py, aiokafka's debug log). From a rebalance's start until its recovery is
  complete the consumer's fetcher now asks for a short wait (`streams.kafka.FETCH_WAIT_MS`); then
  Faust's 1.5 s again, since a short wait in steady running cost latency (bench/e2e.py at 5,000/s:
  p50 234 ms against 78; the fetcher's `_fetch_max_wait_ms`, read for every fetch it sends).

* `recover_without_a_pause`: Faust's table manager sleeps a fixed second before it starts recovery
  (`TableManager.on_start`), time for tables made lazily (in an agent's body) to register. A worker
  makes every table before it starts, so recovery starts at once (`TableManager.on_start`,
  replaced for the whole process, the same steps without the sleep).

* `events`: an agent's events as `Stream.events()` hands them over, without its per-event costs. Faust's
  stream iterator (`Stream._c_aiter`) yields to the event loop before every event (`await sleep(0)`: one
  more turn of the loop, an epoll call, per record), calls the monitor's sensors twice and does Faust's
  acknowledgement bookkeeping, which tribunal replaces anyway (`commit_only`). The worker's agents read the
  channel's queue directly (`Channel.queue`: `get_nowait`, `empty`) and keep what the stream
  does that matters: events of another consumer generation or taken while the flow is suspended are
  skipped, each event is tracked as unacknowledged while the agent handles it (so a rebalance's
  `Consumer.wait_empty` waits for it, `_unacked_messages`, `_waiting_for_ack`) and is the task's current
  event (`faust.streams._current_event`, for the tables' stores); its partition is then one Faust commits
  (a key of `Consumer._acked`, as an acknowledgement makes it: Faust commits the partitions there,
  `_filter_tps_with_pending_acks`, and drops a revoked one's); and the loop is yielded to every
  `YIELD_EVERY` events, as Faust's own fetch loop does.

* `assign_topics_missing_from_metadata`: the group's leader assigns partitions from its own consumer's metadata,
  and Faust's assignor (`PartitionAssignor._get_copartitioned_groups`) skips, with a warning ("Ignoring missing
  topic"), every subscribed topic that metadata does not list yet: seconds after the topics were made, or with a
  broker down, the changelogs. Their inputs were then assigned without them: the worker folded against tables it
  never recovered, dead-lettered every metric as `no_policy`, and committed pool states without a decider, which
  every later owner recovered (the combined-fault day: 469 inputs of a partition never decided). Every topic a
  worker subscribes to is one it made with the app's partition count before Faust started
  (`streams.worker.run`), so a topic the leader has not seen yet counts as having that many
  (`PartitionAssignor._perform_assignment`, given a view of the cluster that says so).

* `rejoin_when_the_group_is_rebalancing`: aiokafka (0.14) takes a JoinGroup answered REBALANCE_IN_PROGRESS (the group
  began another rebalance while this member joined: seen with a broker away and workers restarting) for an
  unexpected error and hands it to the user, and its group coordination then waits until the user's next `getmany`
  or `position` has taken it. Faust's fetch loop reads aiokafka's fetcher directly and never takes it: a worker
  that met it in its first join hung there for good, unassigned (the combined-fault day in CI, 4 minutes and
  more, before the stall watchdog had started). Kafka's own client joins again (KAFKA-10870); so does a worker now
  (`CoordinatorGroupRebalance.perform_group_join`, wrapped for the whole process: that answer means "join again",
  after aiokafka's retry back-off).

`check()` runs before the app is built and names whatever a Faust upgrade moved.
"""

from __future__ import annotations

import asyncio
import inspect
import linecache
import logging
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from streams.errors import TribunalError

log = logging.getLogger(__name__)

_INSTANCE_ATTRIBUTES = ("_gap", "_acked", "_acked_index", "_unacked_messages", "_committed_offset")
YIELD_EVERY = 100  # events an agent handles before it lets the event loop run others (`events`)
_ORIGINALS: dict[str, Any] = {}  # Faust's own functions that a replacement calls, kept from the first replacement


def _source(obj: Any) -> str:
    """`inspect.getsource` of a function or module, without its search of every loaded module for the one that
    holds it (`inspect.getmodule`: 0.09 s of each worker's start for `check`'s fifteen reads)."""
    if inspect.ismodule(obj):
        return Path(obj.__file__ or "").read_text()
    code = inspect.unwrap(obj).__code__
    return "".join(inspect.getblock(linecache.getlines(code.co_filename)[code.co_firstlineno - 1:]))


def check() -> None:
    """Raise `TribunalError` naming every private member tribunal needs that this Faust lacks."""
    import aiokafka
    import faust.streams
    import faust.transport.conductor
    from faust.stores.base import Store
    from faust.transport.consumer import Consumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Producer

    wanted = [(AIOKafkaConsumerThread, "_highwaters"), (Producer, "_transaction_producers"),
              (Producer, "_trn_locks"), (Store, "_encode_key"), (Store, "_encode_value"),
              (Consumer, "_new_offset"), (Consumer, "_add_gap"), (Producer, "commit_transactions"),
              (Producer, "_settings_extra"), (Producer, "_ensure_producer"), (Consumer, "on_buffer_full")]
    from faust.stores.rocksdb import Store as RocksDBStore

    wanted += [(RocksDBStore, "set_persisted_offset"), (RocksDBStore, "persisted_offset")]
    missing = [f"{cls.__name__}.{name}" for cls, name in wanted if not hasattr(cls, name)]
    import faust.utils.venusian

    if not hasattr(faust.utils.venusian, "attach"):
        missing.append("faust.utils.venusian.attach")
    if not hasattr(faust.streams, "_current_event"):
        missing.append("faust.streams._current_event")
    if "self.wait_first(" not in _source(Consumer._drain_messages):
        missing.append("Consumer._drain_messages delivering through wait_first")
    if "on_buffer_full" not in _source(faust.transport.conductor):
        missing.append("faust.transport.conductor pausing a partition through Consumer.on_buffer_full")
    import faust.tables.recovery

    slurp = _source(faust.tables.recovery.Recovery._slurp_changelogs.fun)  # a `Service.task`
    if f"changelog_queue.get(), timeout={RECOVERY_WAIT}" not in slurp or "timeout_count > 1" not in slurp:
        missing.append(f"Recovery._slurp_changelogs waiting {RECOVERY_WAIT} s twice for an empty changelog queue")
    build = _source(faust.tables.recovery.Recovery._restart_recovery.fun)  # a `Service.task`
    if "_build_offsets" not in build or "active_offsets[tp] > active_highwaters[tp]" not in build:
        missing.append("Recovery building the active offsets (`_build_offsets`), then checking them against the "
                       "highwaters")
    add = _source(faust.tables.recovery.Recovery._add)
    if "table.persisted_offset(tp)" not in add or "offsets.setdefault(tp, None)" not in add:
        missing.append("Recovery._add keeping an in-memory offset when the store has none")
    if "self.app.consumer.position(tp)" not in slurp:
        missing.append("Recovery._slurp_changelogs ending a partition's recovery by the consumer's position")
    from faust.transport.consumer import ThreadDelegateConsumer

    if not hasattr(ThreadDelegateConsumer, "position") or not hasattr(ThreadDelegateConsumer, "seek"):
        missing.append("ThreadDelegateConsumer.position and seek")
    from faust.tables.manager import TableManager

    if [line.strip() for line in _source(TableManager.on_start).splitlines()[2:]] != _TABLE_MANAGER_START:
        missing.append("TableManager.on_start sleeping 1 s, then updating its channels and starting recovery")
    create = _source(AIOKafkaConsumerThread._create_worker_consumer)
    from aiokafka.consumer.fetcher import Fetcher

    kept, fetcher_init = "self._fetch_max_wait_ms = fetch_max_wait_ms", _source(Fetcher.__init__)
    if (f"fetch_max_wait_ms={FAUST_FETCH_WAIT_MS}" not in create or kept not in fetcher_init
            or kept not in _source(aiokafka.AIOKafkaConsumer.__init__)):
        missing.append(f"AIOKafkaConsumerThread._create_worker_consumer setting fetch_max_wait_ms="
                       f"{FAUST_FETCH_WAIT_MS} and aiokafka's Fetcher keeping it")
    actions = _source(_ORIGINALS.get("_get_actions_per_node", Fetcher._get_actions_per_node))
    if ("elif node_id in self._in_flight" not in actions or "if tp in self._records" not in actions
            or not hasattr(Fetcher, "_select_read_replica")
            or "self._prefetch_backoff" not in fetcher_init):
        missing.append("aiokafka's Fetcher._get_actions_per_node leaving out partitions with records not yet taken "
                       "and one fetch in flight per broker")
    if "terminal.logtable(" not in _source(Consumer._commit_offsets):
        missing.append("Consumer._commit_offsets drawing its offsets with terminal.logtable")
    from faust.types.tuples import Message

    missing += [f"Message.{name}" for name in ("tracked", "acked", "generation_id") if name not in Message.__slots__]
    if not hasattr(Consumer, "_waiting_for_ack"):
        missing.append("Consumer._waiting_for_ack")
    if "for tp in self._acked" not in _source(Consumer._filter_tps_with_pending_acks):
        missing.append("Consumer._filter_tps_with_pending_acks committing the partitions in _acked")
    from faust.assignor.partition_assignor import PartitionAssignor

    groups = _source(PartitionAssignor._get_copartitioned_groups)
    perform = _source(_ORIGINALS.get("PartitionAssignor._perform_assignment",
                                               PartitionAssignor._perform_assignment))
    if "cluster.partitions_for_topic(topic)" not in groups or re.findall(r"\bcluster\b", perform) != ["cluster"] * 2:
        missing.append("PartitionAssignor reading the cluster only through partitions_for_topic")  # its parameter,
        # handed to _get_copartitioned_groups and nowhere else
    from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance

    join = _source(_ORIGINALS.get("perform_group_join", CoordinatorGroupRebalance.perform_group_join))
    if _JOIN_ERROR not in join or "return None" not in join:
        missing.append("aiokafka's CoordinatorGroupRebalance.perform_group_join raising KafkaError(repr(err)) for "
                       "an unexpected answer and returning None to join again")
    from faust.transport.consumer import TransactionManager

    starting = _source(_ORIGINALS.setdefault("_start_transactions", TransactionManager._start_transactions))
    if "for transactional_id in tids" not in starting or "maybe_begin_transaction" not in starting:
        missing.append("TransactionManager._start_transactions beginning each transactional id in turn")
    init = _source(Consumer.__init__)
    missing += [f"Consumer.{name}" for name in _INSTANCE_ATTRIBUTES if f"self.{name} =" not in init]
    if missing:
        raise TribunalError(f"this Faust lacks {', '.join(missing)}, which tribunal's exactly-once needs; "
                            "pin faust-streaming 0.15.x (see streams/worker/faust_private.py)")


class _Declared:
    """The leader's view of the cluster, as the assignor reads it: a topic its metadata does not list yet has the
    partitions every topic of the app was made with."""

    def __init__(self, cluster: Any, partitions: int) -> None:
        self.cluster, self.partitions = cluster, partitions

    def partitions_for_topic(self, topic: str) -> set[int]:
        known = self.cluster.partitions_for_topic(topic)
        if not known:
            log.info("assigning %s with %d partitions: the leader's metadata does not list it yet", topic,
                     self.partitions)
            return set(range(self.partitions))
        return set(known)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def assign_topics_missing_from_metadata() -> None:
    from faust.assignor.partition_assignor import PartitionAssignor

    original = _ORIGINALS.setdefault("PartitionAssignor._perform_assignment", PartitionAssignor._perform_assignment)

    def _perform_assignment(self: Any, cluster: Any, member_metadata: Any) -> Any:
        return original(self, _Declared(cluster, int(self.app.conf.topic_partitions)), member_metadata)

    PartitionAssignor._perform_assignment = _perform_assignment


RECOVERY_WAIT = 5.0  # Faust's wait for the next changelog record before it asks whether recovery is done
RECOVERY_WAIT_NOW = 0.05


def recover_past_aborted_transactions_soon() -> None:
    import types

    import faust.tables.recovery

    real = asyncio.wait_for

    async def wait_for(awaitable: Any, timeout: float | None) -> Any:
        return await real(awaitable, RECOVERY_WAIT_NOW if timeout == RECOVERY_WAIT else timeout)

    shim = types.SimpleNamespace(**{name: getattr(asyncio, name) for name in dir(asyncio) if not name.startswith("__")})
    shim.wait_for = wait_for
    faust.tables.recovery.asyncio = shim  # type: ignore[assignment]


_TABLE_MANAGER_START = ["await self.sleep(1.0)", "if not self.should_stop:", "await self._update_channels()",
                        "await self.recovery.start()"]


def skip_autodiscovery_marks() -> None:
    """Faust marks each agent, task, service and page for venusian's autodiscovery, which the worker never runs (no
    `autodiscover`): each mark reads its caller's source file (`inspect.getframeinfo`), 0.05 s of a start."""
    import faust.utils.venusian

    faust.utils.venusian.attach = lambda *args, **kwargs: None


def start_transactions_at_once() -> None:
    from faust.transport.consumer import TransactionManager

    _ORIGINALS.setdefault("_start_transactions", TransactionManager._start_transactions)  # what check() reads

    async def _start_transactions(self: Any, tids: Any) -> None:
        await asyncio.gather(*(self.producer.maybe_begin_transaction(tid) for tid in tids))

    TransactionManager._start_transactions = _start_transactions


def recover_without_a_pause() -> None:
    from faust.tables.manager import TableManager

    async def on_start(self: Any) -> None:
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()

    TableManager.on_start = on_start


FAUST_FETCH_WAIT_MS = 1500


def fetch_briefly_while_recovering(app: Any, brief_ms: int) -> None:
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    create = _ORIGINALS.setdefault("_create_worker_consumer", AIOKafkaConsumerThread._create_worker_consumer)

    def _create_worker_consumer(self: Any, transport: Any) -> Any:
        consumer = create(self, transport)
        consumer._fetch_max_wait_ms = brief_ms  # a worker starts by recovering; read when its fetcher starts
        return consumer

    AIOKafkaConsumerThread._create_worker_consumer = _create_worker_consumer

    def wait(ms: int) -> None:
        consumer = getattr(app.consumer._thread, "_consumer", None)
        fetcher = getattr(consumer, "_fetcher", None)
        if fetcher is not None:
            fetcher._fetch_max_wait_ms = ms

    @app.on_partitions_revoked.connect
    async def brief(sender: Any, /, *args: Any, **kwargs: Any) -> None:
        wait(brief_ms)

    @app.on_rebalance_complete.connect
    async def usual(sender: Any, /, *args: Any, **kwargs: Any) -> None:
        wait(FAUST_FETCH_WAIT_MS)


def ask_the_broker_for_highwaters() -> None:
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    async def _highwaters(self: Any, partitions: list[Any]) -> Any:
        return await self._ensure_consumer().end_offsets(partitions)

    AIOKafkaConsumerThread._highwaters = _highwaters


def distrust_stores_ahead_of_their_changelogs(ahead: Callable[[Mapping[tuple[str, int], tuple[int, int]]], None]
                                              ) -> None:
    """Call `ahead` with each active changelog partition whose store claims an offset past the changelog's end
    ((topic, partition) -> (stored, highwater)), before Faust's own check of the same raises and the worker stops;
    `ahead` is expected not to return (`Recovery._build_offsets`, wrapped for the whole process)."""
    from faust.tables.recovery import Recovery

    real = _ORIGINALS.setdefault("_build_offsets", Recovery._build_offsets)

    async def _build_offsets(self: Any, consumer: Any, tps: Any, destination: Any, title: str) -> None:
        await real(self, consumer, tps, destination, title)
        if destination is not self.active_offsets:
            return
        found = {(tp.topic, tp.partition): (destination[tp], self.active_highwaters[tp]) for tp in sorted(tps)
                 if destination.get(tp) is not None and self.active_highwaters.get(tp) is not None
                 and destination[tp] > self.active_highwaters[tp]}
        if found:
            ahead(found)

    Recovery._build_offsets = _build_offsets


def recover_from_the_start_when_unsure() -> None:
    from faust.tables.recovery import Recovery

    def _add(self: Any, table: Any, tp: Any, offsets: Any) -> None:
        self.tp_to_table[tp] = table
        stored, remembered = table.persisted_offset(tp), offsets.get(tp)
        if stored is None and remembered is not None and remembered >= 0:  # -1: from the start anyway
            log.info("recovery of %s[%d] reads from the start: its store has no offset (Faust would have "
                     "started after %d, a figure left in memory)", tp.topic, tp.partition, remembered)
        offsets[tp] = stored

    Recovery._add = _add


Asks = Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> [start, before)


def end_recovery_only_when_read(app: Any,
                                first_committed: Callable[[Asks], Awaitable[Mapping[tuple[str, int], int | None]]]
                                ) -> None:
    from faust.transport.consumer import ThreadDelegateConsumer

    real = _ORIGINALS.setdefault("position", ThreadDelegateConsumer.position)  # once, whatever apps a process builds
    answers: dict[tuple[str, int], tuple[int, int, int | None]] = {}  # -> (applied, highwater, first committed)

    async def position(self: Any, tp: Any) -> int | None:
        at = await real(self, tp)
        recovery = app.tables.recovery
        applied, highwater = recovery.active_offsets.get(tp), recovery.active_highwaters.get(tp)
        if at is None or applied is None or highwater is None or at < highwater or applied >= highwater:
            return at
        key = (tp.topic, tp.partition)
        known = answers.get(key)
        if known is None or known[:2] != (applied, highwater):
            # Asked for every partition recovery has not finished at once: one fetch, not one per partition
            # (after a SIGKILL each changelog partition ends in an aborted transaction, and this is asked of all).
            asks = {(other.topic, other.partition): (done + 1, end) for other, end in list(
                recovery.active_highwaters.items()) if end is not None
                and (done := recovery.active_offsets.get(other)) is not None and done < end}
            asks[key] = (applied + 1, highwater)
            generation = app.consumer_generation_id
            found = await first_committed(asks)  # a log range's committed records never change: kept
            answers.update({k: (start - 1, before, found[k]) for k, (start, before) in asks.items()})
            if (app.consumer_generation_id != generation or tp not in recovery.active_tps
                    or (recovery.active_offsets.get(tp), recovery.active_highwaters.get(tp)) != (applied, highwater)):
                return -1  # a rebalance came meanwhile: nothing of the old assignment is written into the new one
            known = answers[key]
        first = known[2]
        if first is None:
            return at  # only aborted records and markers are left: recovery may end here
        log.warning("recovery of %s[%d] had fetched to %d but applied only to %d, with a committed record at %d: "
                    "reading from there again", tp.topic, tp.partition, at, applied, first)
        answers.pop(key)
        await self.seek_wait({tp: first})  # in the consumer's thread, as recovery's own seeks
        return applied

    ThreadDelegateConsumer.position = position


class _Rest:
    """Awaits the rest of a coroutine whose first step already ran and yielded `yielded`."""

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self.coro, self.yielded = coro, yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.yielded
        while True:
            try:
                sent = yield value  # to the task: the future the coroutine waits on (None: a bare yield)
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 (cancelled, or the future failed: passed on to the coroutine)
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def deliver_as_the_worker() -> None:
    """How the worker's agents are handed their records, with `events`: no task per fetch, fetching while a
    stream's buffer is full, and every busy partition in each fetch. One call for the worker and for
    bench/bare_faust.py, which measures this path."""
    deliver_without_tasks()
    fetch_while_streams_are_full()
    fetch_busy_partitions_together()


def fetch_busy_partitions_together() -> None:
    from aiokafka.consumer.fetcher import Fetcher, FetchResult

    actions = _ORIGINALS.setdefault("_get_actions_per_node", Fetcher._get_actions_per_node)
    fetched = _ORIGINALS.setdefault("fetched_records", Fetcher.fetched_records)

    async def fetched_records(self: Any, partitions: Any, timeout: float = 0, max_records: int | None = None
                              ) -> Any:
        self.tribunal_wanted = partitions  # Faust's own set of the partitions it reads, kept up to date; empty: all
        return await fetched(self, partitions, timeout=timeout, max_records=max_records)

    def _get_actions_per_node(self: Any, assignment: Any) -> Any:
        requests, resets, timeout, invalid, resumes = actions(self, assignment)
        wanted = getattr(self, "tribunal_wanted", None)
        held = {self._select_read_replica(tp) for tp, result in self._records.items()
                if type(result) is FetchResult and result.has_more() and (not wanted or tp in wanted)}
        if held:  # fetched again together once read (the reader's getmany wakes this routine); until then, look again
            requests = [(node, request) for node, request in requests if node not in held]
            timeout = min(timeout, self._prefetch_backoff)
        return requests, resets, timeout, invalid, resumes

    Fetcher.fetched_records = fetched_records
    Fetcher._get_actions_per_node = _get_actions_per_node


def deliver_without_tasks() -> None:
    from faust.transport.consumer import Consumer
    from mode.services import WaitResults

    racing = Consumer.wait_first
    if getattr(racing, "tribunal", False):
        return

    async def wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        first, others = coros[0], coros[1:]
        if (not asyncio.iscoroutine(first) or self.suspend_flow.is_set() or self._stopped.is_set()
                or self._crashed.is_set()):
            return await racing(self, *coros, timeout=timeout)
        try:
            yielded = first.send(None)
        except StopIteration as done:  # delivered without waiting
            _close(others)
            return WaitResults([first], [done.value], False)
        except BaseException:
            _close(others)
            raise
        return await racing(self, _Rest(first, yielded), *others, timeout=timeout)  # wrapped in a task there

    wait_first.tribunal = True  # type: ignore[attr-defined]
    Consumer.wait_first = wait_first


def _close(coros: tuple[Any, ...]) -> None:
    for coro in coros:
        if asyncio.iscoroutine(coro):
            coro.close()


def fetch_while_streams_are_full() -> None:
    from faust.transport.consumer import Consumer

    def on_buffer_full(self: Any, tp: Any) -> None:
        """Leave `tp` in the fetch set: the full buffer holds the delivery back instead."""

    Consumer.on_buffer_full = on_buffer_full


class _DrawnWhenLogged:
    """A `terminal.logtable` drawn only when a log record formats it."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args, self.kwargs = args, kwargs

    def __str__(self) -> str:
        from faust.utils import terminal

        return terminal.logtable(*self.args, **self.kwargs)


def commit_without_a_table() -> None:
    import types

    import faust.transport.consumer

    faust.transport.consumer.terminal = types.SimpleNamespace(  # type: ignore[assignment]
        logtable=lambda *args, **kwargs: _DrawnWhenLogged(args, kwargs))


def commit_transactions_at_once(failed: Callable[[BaseException], object] = lambda error: None) -> None:
    """`failed` hears of an error of a commit before Faust does (Faust crashes the app: a fenced worker exited)."""
    from faust.transport.drivers.aiokafka import Producer

    async def commit_transactions(self: Any, tid_to_offset_map: Mapping[str, Mapping[Any, int]], group_id: str,
                                  start_new_transaction: bool = True) -> None:
        async def commit(transactional_id: str, offsets: Mapping[Any, int]) -> None:
            async with self._trn_locks[transactional_id]:
                producer = self._transaction_producers.get(transactional_id)
                if producer is None:
                    log.warning("commit invoked for unknown transaction %s", transactional_id)
                    return
                await producer.send_offsets_to_transaction(offsets, group_id)
                await producer.commit_transaction()
                if start_new_transaction:
                    await producer.begin_transaction()

        try:
            await asyncio.gather(*(commit(tid, offsets) for tid, offsets in tid_to_offset_map.items()))
        except Exception as e:
            failed(e)
            raise

    Producer.commit_transactions = commit_transactions


_JOIN_ERROR = "raise Errors.KafkaError(repr(err))"


def rejoin_when_the_group_is_rebalancing() -> None:
    from aiokafka import errors
    from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance

    original = _ORIGINALS.setdefault("perform_group_join", CoordinatorGroupRebalance.perform_group_join)
    rebalancing = (repr(errors.RebalanceInProgressError()),)

    async def perform_group_join(self: Any) -> Any:
        try:
            return await original(self)
        except errors.KafkaError as error:
            if type(error) is not errors.KafkaError or error.args != rebalancing:
                raise
            log.info("joining group %s again: it began another rebalance while this worker joined", self.group_id)
            return None  # aiokafka waits its retry back-off and joins again

    CoordinatorGroupRebalance.perform_group_join = perform_group_join


RETRY_BACKOFF_MS = 10


def retry_transactions_soon() -> None:
    from faust.transport.drivers.aiokafka import Producer

    settings_extra = Producer._settings_extra
    if getattr(settings_extra, "tribunal", False):
        return

    def _settings_extra(self: Any) -> Mapping[str, Any]:
        extra = dict(settings_extra(self))
        if self.app.in_transaction:
            extra["retry_backoff_ms"] = RETRY_BACKOFF_MS
        return extra

    _settings_extra.tribunal = True  # type: ignore[attr-defined]
    Producer._settings_extra = _settings_extra


async def commit_in_transactions(app: Any, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit `offsets` ((topic, partition) -> offset) through each partition's transactional producer,
    bypassing Faust's consumer (which forgets a revoked partition's acknowledgements before the app
    hears of the revocation)."""
    from aiokafka.structs import TopicPartition  # what Faust's own commits carry (aiokafka checks the class)

    if offsets:
        await app.consumer.transactions.commit({TopicPartition(topic, partition): offset
                                                for (topic, partition), offset in sorted(offsets.items())})


async def add_offsets(app: Any, producer: Any, offsets: Mapping[tuple[str, int], int]) -> None:
    """Add `offsets` ((topic, partition) -> offset) to `producer`'s transaction, for the app's consumer group
    (the group Faust's own commits name)."""
    from aiokafka.structs import TopicPartition

    await producer.send_offsets_to_transaction({TopicPartition(t, p): o for (t, p), o in sorted(offsets.items())},
                                               app.conf.id)


def committed(app: Any, offsets: Mapping[tuple[str, int], int]) -> None:
    """Tell Faust's consumer that `offsets` were committed (as its own commit does after its transactions), so
    that its timer does not commit them again (`Consumer._committed_offset`, `tables.on_commit`)."""
    from faust.types import TP

    tps = {TP(t, p): o for (t, p), o in offsets.items()}
    if tps:
        app.tables.on_commit(tps)
        app.consumer._committed_offset.update(tps)
        app.monitor.on_tp_commit(tps)


def owner_of(app: Any, table: Any, partition: int) -> tuple[str, int] | None:
    """(host, port) of the web server of the worker that holds `partition` of `table`, as the group's
    last assignment says (None while no member holds it)."""
    topic = table.changelog_topic.get_topic_name()
    for url, topics in app.router.table_metadata(table.name).items():
        if partition in topics.get(topic, ()):
            return _ident(url)
    return None


def owner_of_self(app: Any) -> tuple[str, int]:
    """(host, port) of this worker's own web server, as it announces it to the group."""
    return _ident(app.conf.canonical_url)


def _ident(url: Any) -> tuple[str, int]:
    from yarl import URL

    parsed = URL(str(url))
    return parsed.host or "", parsed.port or 80


def transaction_producer(producer: Any, transactional_id: str) -> tuple[Any, Any]:
    """(the lock Faust commits `transactional_id` under, its aiokafka producer)."""
    return producer._trn_locks[transactional_id], producer._transaction_producers[transactional_id]


def keep_locally(writes: Sequence[tuple[Any, Any, Any]], event: Any, read_to: Mapping[tuple[str, int], int]
                 ) -> None:
    """Set each `table[key] = value` of `writes` in the local store only, in `event`'s partition; then record
    that the store holds each changelog partition of `read_to` (the batch's writes, outputs included: those are
    passed over) up to that offset (`Store.set_persisted_offset`, which recovery starts from), after the values,
    so that a store never claims an offset its values lack."""
    from faust.streams import _current_event
    from faust.types import TP

    token = _current_event.set(weakref.ref(event))
    try:
        for table, key, value in writes:
            table.data[key] = value
    finally:
        _current_event.reset(token)
    stores = {table.changelog_topic.get_topic_name(): table.data for table, _, _ in writes}
    for (topic, partition), offset in read_to.items():
        if topic in stores:
            stores[topic].set_persisted_offset(TP(topic, partition), offset)


def plain_producer(producer: Any) -> Any:
    """The aiokafka producer behind Faust's producer when there are no transactions (at-least-once)."""
    return producer._ensure_producer()


def encoded(table: Any, key: Any, value: Any) -> tuple[bytes, bytes | None]:
    """A table entry's key and value as its changelog record carries them."""
    store = table.data
    return store._encode_key(key), store._encode_value(value)


def commit_only(consumer: Any, offset_for: Callable[[Any], int | None]) -> None:
    """Make `consumer` commit `offset_for(tp)` for each partition, and never count a gap as processed."""
    def new_offset(tp: Any) -> int | None:
        acked = consumer._acked.get(tp)
        if acked:  # Faust's own bookkeeping, kept from growing; the guard's figure is what counts
            acked.clear()
            consumer._acked_index[tp].clear()
        return offset_for(tp)

    async def no_gap(tp: Any, offset_from: int, offset_to: int) -> None:
        return None

    consumer._new_offset = new_offset
    consumer._add_gap = no_gap
    consumer._gap.clear()


def let_go(consumer: Any, message: Any) -> None:
    """Let `message` go without acknowledging it."""
    message.acked = True  # Faust's ack() is a no-op for a message marked acked
    consumer._unacked_messages.discard(message)


async def events(app: Any, stream: Any) -> AsyncIterator[Any]:
    """`stream`'s events, as `stream.events()` would hand them over, minus its per-event costs (see the module doc)."""
    from faust.streams import _current_event
    from faust.types import EventT
    from mode.utils.futures import notify

    started = await stream.maybe_start()
    channel = stream.channel
    queue = channel.queue
    empty, get_now, get = queue.empty, queue.get_nowait, channel.__anext__  # both raise what was thrown into it
    consumer, flow = app.consumer, app.flow_control
    unacked, acked = consumer._unacked_messages, consumer._acked
    handled = 0
    try:
        while not stream.should_stop:
            if empty():
                handled = 0
                try:
                    value = await get()
                except StopAsyncIteration:  # the channel is stopping: so ends Faust's own iterator
                    return
            else:
                handled += 1
                if handled >= YIELD_EVERY:
                    handled = 0
                    await asyncio.sleep(0)
                    continue
                try:
                    value = get_now()
                except StopAsyncIteration:
                    return
            if not isinstance(value, EventT):
                continue
            message = value.message
            if not flow.is_active() or message.generation_id != app.consumer_generation_id:
                continue  # as Faust's stream: delivered before a rebalance, delivered again after it
            message.tracked = True
            unacked.add(message)
            _current_event.set(weakref.ref(value))
            try:
                yield value
            finally:
                message.acked = True  # Faust's own ack() is now a no-op for it
                unacked.discard(message)
                if message.tp not in acked:  # what an acknowledgement would leave: Faust commits this partition
                    acked[message.tp] = []
                notify(consumer._waiting_for_ack)
    finally:
        stream._channel_stop_iteration(channel)
        if started:
            await stream.stop()
            stream.service_reset()
