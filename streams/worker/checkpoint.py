"""The worker's unit of commit: every record folded since the last commit, written and committed as one.

Why batches (bench/e2e.py, docs/performance-history.md): written record by record, a decision cost a
changelog record per input, a lock round per input, and Faust's commit of one transactional
producer after another (100-500 ms with eight of them), during which the agent waited on the
very lock the commit held. So the agents only fold, in memory, and hand each record's effects to
the checkpoint; one flusher task takes everything folded so far, writes each changed key's state
once (the changelog is compacted: only its last value counts), sends the outputs, and commits each
source partition's transaction as soon as its own records are acknowledged, the partitions side by
side (not through Faust's consumer, which committed every producer after the slowest partition's
acknowledgement, and twice), while the agents fold the next records. Under light load a batch
is the one record that just arrived; under heavy load it grows to what arrived during the previous
commit, so latency stays about two commit round trips and throughput rises with load.

Why the worker writes its changelogs and outputs itself, under Faust's transaction lock: two
gaps in Faust's exactly-once, measured in tests/worker/test_crash.py under SIGKILLs. `Topic.send`
to a topic the app does not consume goes out outside any transaction (faust-streaming#177), and
a table write's changelog record is sent later by a background task, so a commit could fall
between a record's outputs and its state (after a crash: decided twice). So tables are set in
the local store only, and their changelog records go out with the outputs, through the
transactional producer of the source partition (`streams.worker.faust_private`).

What keeps it exactly-once:
* All of one source partition's effects in a batch (changelog records and outputs) are sent under
  the lock Faust commits that partition's transactional producer under, in one hold: a commit
  cannot fall between a record's outputs and the state that remembers them. A SIGKILL at any step
  of a partition's flush leaves its transaction open, and the partition's next producer aborts it:
  the batch whole or none of it (tests/worker/test_flush_steps.py kills the worker at each step).
* The states written are dumped when the batch is taken, before the first await: a state may
  never include records whose outputs are not in the same batch. They enter the local store only
  once their partition's transaction committed (`_keep`), with the changelog offsets the store then
  holds: a restart keeps the store and recovers from there (`streams.worker.app`).
* An input offset counts as done (`Continuity.done`) only after the broker acknowledged its
  effects; Faust's commit commits only done offsets. A record whose effects were committed but
  whose offset was not is recognised on redelivery by the offsets kept in the state, and yields
  nothing.
* When the group starts a rebalance (its partitions are revoked), everything folded so far is
  written and committed before the rebalance goes on (`settle`), and nothing more is written until
  the new assignment (`resume`), as Kafka Streams commits its tasks on revocation. A partition this
  worker keeps keeps its transactional producer: without this, a transaction left open across the
  rebalance held decisions whose input offsets were never committed; the partition was delivered
  again from the committed offset, recovery had put the committed states back, and the next commit
  made both the old and the new decisions visible (tests/worker/test_scale_out.py, three workers).
* A batch folded before a rebalance and not yet written is dropped, and the keepers forget their
  cached states: the partition's records are delivered again from the committed offset, to
  whichever worker owns it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streams.core.outputs import Emit, topic_of
from streams.kafka import partition_for
from streams.settings import Settings
from streams.worker import failpoints, faust_private
from streams.worker.continuity import Continuity
from streams.worker.keeper import Keeper
from streams.worker.metrics import Tally
from streams.worker.routing import Send
from streams.worker.surface import App, Event
from streams.worker.watchdog import restart_if_fenced, restart_in_place

log = logging.getLogger(__name__)

WAIT_PER_RECORD = 0.0001  # seconds the next flush waits per record the last one wrote (see `Checkpoint.run`)


def transactional_id(app: App, topic: str, partition: int) -> str | None:
    """The id of the producer whose transaction commits this partition's offsets (None without EOS)."""
    if not app.in_transaction:
        return None
    return f"{app.conf.id}-{app.assignor.group_for_topic(topic)}-{partition}"


@dataclass
class _Partition:
    """One source partition's effects since the last flush."""

    tid: str | None
    partition: int
    event: Event | None = None  # the last event folded: the local store's partition context
    sends: list[Send] = field(default_factory=list)
    dirty: dict[tuple[int, str], Keeper[Any]] = field(default_factory=dict)  # (keeper id, key) -> keeper, in order
    last: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) -> last offset folded


@dataclass
class _Taken:
    """A source partition's part of a batch, as taken: its records to send, and what enters its local store once
    its transaction commits."""

    part: _Partition
    records: list[Send]
    local: list[tuple[Any, str, Any]]  # (table, key, value)


@dataclass
class Stats:
    """Where the worker's time goes, cumulative since start (served at `/checkpoint/`, read by bench/e2e.py)."""

    records: int = 0
    batches: int = 0
    largest: int = 0  # records in the largest batch written
    waiting: float = 0.0  # seconds the agents waited for Faust to hand them the next record
    admit: float = 0.0  # seconds admitting records (the continuity guard) and waiting for room in the batch
    fold: float = 0.0  # seconds in the agents' own code: key, route, load, fold, hand over
    write: float = 0.0  # seconds dumping states and sending a batch's records
    acks: float = 0.0  # seconds waiting for the broker to acknowledge them
    commit: float = 0.0  # seconds committing (all transactional producers at once)

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class Checkpoint:
    app: App
    settings: Settings
    continuity: Continuity
    keepers: list[Keeper[Any]]
    max_records: int = 5_000  # a batch this large makes the agents wait for the flusher
    interval: float = 0.0  # seconds at most between a commit and the next flush's start
    _by_tid: dict[tuple[str | None, int], _Partition] = field(default_factory=dict)  # the batch, per producer
    _pending: dict[tuple[str, int], _Partition] = field(default_factory=dict)  # source partition -> its entry above
    _count: int = 0
    _generation: int | None = None
    stats: Stats = field(default_factory=Stats)
    tally: Tally = field(default_factory=Tally)  # what `/metrics` shows
    _partitions: dict[str, int] = field(default_factory=dict)  # topic -> partition count
    _work: asyncio.Event = field(default_factory=asyncio.Event)
    _room: asyncio.Event = field(default_factory=asyncio.Event)
    _flushing: asyncio.Lock = field(default_factory=asyncio.Lock)  # one flush at a time: the flusher's or `settle`'s
    _assigned: asyncio.Event = field(default_factory=asyncio.Event)  # clear from a revocation to the next assignment

    def __post_init__(self) -> None:
        self._assigned.set()

    def add(self, event: Event, outputs: Sequence[Emit] = (), source_topic: str | None = None,
            sends: Iterable[Send] = (), keeper: Keeper[Any] | None = None, key: str | None = None) -> None:
        """Record `event` as folded: its outputs (dead letters go to `source_topic`'s DLQ), `sends`, and
        `key` of `keeper` as changed; all are written at the next flush. The caller follows the
        generation (`follow_generation`) before it loads a state for the event."""
        m = event.message
        part = self._pending.get((m.topic, m.partition))
        if part is None:
            tid = transactional_id(self.app, m.topic, m.partition)
            part = self._by_tid.get((tid, m.partition))
            if part is None:
                part = self._by_tid[(tid, m.partition)] = _Partition(tid, m.partition)
            self._pending[(m.topic, m.partition)] = part
        source, prefix = source_topic or m.topic, self.settings.topic_prefix
        part.sends.extend(Send(topic_of(e.stream, source, prefix), e.key.encode("utf-8"), e.value_bytes())
                          for e in outputs)
        part.sends.extend(sends)
        if sends:  # forwarded to its key's partition, folded when it arrives there
            self.tally.forwarded(m.topic)
        else:
            self.tally.folded(source, outputs)
        if keeper is not None and key is not None:
            part.dirty[(id(keeper), key)] = keeper
        part.last[(m.topic, m.partition)] = m.offset
        part.event = event
        self._count += 1
        self.stats.records += 1
        self._work.set()

    def follow_generation(self) -> None:
        """After a rebalance, forget every state folded in memory (its batch is dropped, see `_take`)."""
        generation = self.continuity.generation
        if generation != self._generation:
            for keeper in self.keepers:
                keeper.forget()
            self._by_tid.clear()
            self._pending.clear()
            self._count = 0
            self._generation = generation

    async def room(self) -> bool:
        """Wait while the batch being folded is full; False if the group rebalanced meanwhile.

        Called between admitting a record and folding it (both agents share one batch, so the room
        is checked last). A record admitted before a rebalance must not be folded after it: its
        partition is delivered again from the committed offset, to whichever worker owns it now.
        """
        generation = self.continuity.generation
        while self._count >= self.max_records:
            self._room.clear()
            await self._room.wait()
        return self.app.consumer_generation_id == generation

    async def run(self) -> None:
        """The flusher: write and commit whatever was folded, after a pause that grows with the load.

        A transaction costs the broker about the same whatever it holds (measured: at a commit
        every 30 ms the broker spent three times the CPU the worker did). So after a commit the
        flusher waits `WAIT_PER_RECORD` for each record the last batch held, at most `interval`:
        a light load is committed at once (a record waits about two commit round trips), a heavy
        one in larger, fewer transactions.
        """
        last, finished = 0, 0.0
        while True:
            await self._work.wait()
            wait = finished + min(self.interval, last * WAIT_PER_RECORD) - time.monotonic()
            if wait > 0 and self._count < self.max_records:
                await asyncio.sleep(wait)
            while not self._assigned.is_set():  # a second revocation may clear it before this wakes
                await self._assigned.wait()
            self._work.clear()
            last = self._count
            await self._flush_or_restart()
            finished = time.monotonic()

    async def settle(self) -> None:
        """The group is rebalancing: write and commit everything folded so far, then write nothing
        until `resume` (see the module doc). Faust has already forgotten the revoked partitions'
        acknowledgements, so under exactly-once the offsets are committed through the transactions
        directly; under at-least-once the batch is only written (redelivery may repeat it)."""
        self._assigned.clear()
        await self._flush_or_restart(settling=True)

    def resume(self) -> None:
        """The new assignment is in place: write again (what was folded before it is dropped)."""
        self._assigned.set()

    async def _flush_or_restart(self, settling: bool = False) -> None:
        try:
            async with self._flushing:
                await self.flush(settling)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # Start again from the committed states (exactly-once covers a crash, and a flusher that
            # died would stall every partition).
            restart_if_fenced(e)
            log.exception("writing a batch failed; restarting the worker")
            restart_in_place()

    def _take(self) -> list[_Taken]:
        """The batch to write, every record of it materialised now (no await here: see the module doc)."""
        pending, self._by_tid, self._pending = self._by_tid, {}, {}
        self._count = 0
        self._room.set()
        if self._generation != self.continuity.generation or self._generation != self.app.consumer_generation_id:
            return []  # folded before a rebalance: delivered again from the committed offsets
        batch = []
        for part in pending.values():
            records, local = [], []
            for (_, key), keeper in part.dirty.items():
                for table, name, value in keeper.writes(key):
                    local.append((table, name, value))  # into the local store once committed (`_keep`)
                    records.append(Send(table.changelog_topic.get_topic_name(),
                                        *faust_private.encoded(table, name, value), part.partition))
            batch.append(_Taken(part, records + part.sends, local))
        return batch

    @staticmethod
    def _keep(taken: _Taken, delivered: Sequence[tuple[str, int, asyncio.Future[Any]]]) -> None:
        """A partition's batch committed: its states into the local store, and with them how far the store now holds
        each changelog partition it wrote (a record batch's first offset: what follows it in the batch holds the
        same states or older ones, and recovery applies it again harmlessly). Only committed states ever enter
        the store, so a restart recovers from there, reading the changelogs' tails only."""
        if not taken.local or taken.part.event is None:
            return
        if not all(future.done() and not future.cancelled() and future.exception() is None
                   for _, _, future in delivered):
            return  # a record lost (its partition revoked): the states go to the partition's new owner instead
        read_to = {(topic, partition): future.result().offset for topic, partition, future in delivered}
        faust_private.keep_locally(taken.local, taken.part.event, read_to)

    async def flush(self, settling: bool = False) -> None:
        generation = self._generation
        started = time.perf_counter()
        count = self._count
        batch = self._take()
        if self.app.in_transaction and not settling:
            handed, sent = await self._commit_each(batch, generation)
        else:
            handed, sent = await self._write_then_commit(batch, generation, settling)
        stats = self.stats
        stats.write += handed - started
        stats.acks += sent - handed
        stats.commit += time.perf_counter() - sent
        if batch:
            self.tally.commit.observe(time.perf_counter() - started)
            stats.batches += 1
            stats.largest = max(stats.largest, count)

    async def _commit_each(self, batch: list[_Taken], generation: int | None) -> tuple[float, float]:
        """Exactly-once: each source partition's transaction from its first send to its commit, the partitions'
        side by side, each as soon as its own records are acknowledged.

        Under its producer's lock, so that Faust's own commit (its timer's) cannot fall in between: the records
        go out; once the broker acknowledged them, the partition's input offsets are added to the transaction
        and it commits. The offsets wait for the acknowledgements although they count only if the transaction
        commits: a broker that verifies transactional writes (Kafka 3.6+, KIP-890) refuses a write still in
        flight while its transaction takes the offsets (NOT_ENOUGH_REPLICAS), and the producer sends it again
        after its back-off (tests/worker/test_checkpoint.py counts such retries: adding the offsets beside the
        acknowledgements made 223 of them in a run of one-record batches). A crash at any step leaves the
        transaction open, and the partition's next producer aborts it: all of the batch or none of it. Returns
        when the last record was sent and when the last partition had its acknowledgements.
        """
        handed = sent = time.perf_counter()

        async def one(taken: _Taken) -> None:
            nonlocal handed, sent
            part = taken.part
            failpoints.reach("taken")
            try:
                lock, producer = faust_private.transaction_producer(self.app.producer, part.tid)  # type: ignore[arg-type]
            except KeyError:  # the partition was revoked meanwhile: its records go to its new owner
                return
            async with lock:
                delivered = await self._send_batches(producer, taken.records)
                handed = max(handed, time.perf_counter())
                failpoints.reach("sent")
                if not await self._acknowledged(delivered, generation):
                    return
                failpoints.reach("acknowledged")
                for (topic, partition), offset in part.last.items():
                    self.continuity.done(topic, partition, offset, generation)
                sent = max(sent, time.perf_counter())
                offsets = {tp: offset + 1 for tp, offset in part.last.items()}
                await faust_private.add_offsets(self.app, producer, offsets)
                failpoints.reach("offsets")
                await producer.commit_transaction()
                failpoints.reach("committed")
                faust_private.committed(self.app, offsets)  # before Faust's timer could commit them again
                self._keep(taken, delivered)
                await producer.begin_transaction()

        await asyncio.gather(*(one(taken) for taken in batch))
        return handed, sent

    async def _write_then_commit(self, batch: list[_Taken], generation: int | None, settling: bool
                                 ) -> tuple[float, float]:
        """At-least-once, and a rebalance's last commit: every record written and acknowledged, then the offsets
        committed (through Faust's consumer, or through the transactions while settling), then the states kept."""
        sent_parts: list[tuple[_Taken, list[tuple[str, int, asyncio.Future[Any]]]]] = []
        for taken in batch:
            part = taken.part
            if part.tid is None:  # at-least-once: Faust's one producer
                mine = await self._send_batches(faust_private.plain_producer(self.app.producer), taken.records)
            else:
                try:
                    lock, producer = faust_private.transaction_producer(self.app.producer, part.tid)
                except KeyError:  # the partition was revoked meanwhile: its records go to its new owner
                    continue
                async with lock:
                    mine = await self._send_batches(producer, taken.records)
            sent_parts.append((taken, mine))
        # Offsets count as done (and so may be committed, by this flush or Faust's timer) once their
        # effects are acknowledged. A broker that verifies transactional writes (Kafka 3.6+, KIP-890)
        # answers a write still in flight while the coordinator adds offsets to its transaction with
        # NOT_ENOUGH_REPLICAS, and the producer sends it again after its retry backoff (about one
        # flush in ten at 1,000/s, measured). A write that failed after a rebalance was for a
        # revoked partition (its producer stopped): its records go to the new owner.
        handed = time.perf_counter()
        acknowledged = await self._acknowledged([d for _, mine in sent_parts for d in mine], generation)
        for taken, _ in sent_parts:
            for (topic, partition), offset in taken.part.last.items():
                self.continuity.done(topic, partition, offset, generation)
        sent = time.perf_counter()
        committed = True
        if settling and self.app.in_transaction:
            committed = generation == self.app.consumer_generation_id
            if committed:  # never an older generation's (lower) offsets
                await faust_private.commit_in_transactions(self.app, self.continuity.done_offsets())
        else:
            # The first commit may only wait for one already in flight (Faust's timer), which may not
            # include this batch's offsets; the second commits them.
            await self.app.consumer.commit()
            await self.app.consumer.commit()
        if acknowledged and committed:
            for taken, mine in sent_parts:
                self._keep(taken, mine)
        return handed, sent

    async def _acknowledged(self, delivered: Sequence[tuple[str, int, asyncio.Future[Any]]], generation: int | None
                            ) -> bool:
        """Whether every write in `delivered` was acknowledged. A write that failed after a rebalance was for a
        revoked partition (its producer stopped): its records go to the new owner. Otherwise nothing of the batch
        counts as done: the first failure is raised, and `run` starts the worker again."""
        futures = [future for _, _, future in delivered]
        failed = [r for r in await asyncio.gather(*futures, return_exceptions=True) if isinstance(r, BaseException)]
        if failed and self.continuity.generation == generation:
            raise failed[0]
        return not failed

    async def _send_batches(self, producer: Any, records: list[Send]) -> list[tuple[str, int, asyncio.Future[Any]]]:
        """Send `records` as one aiokafka record batch per topic partition (`send_batch`), in order per
        partition: a future and a partitioner call per record cost a fifth of the worker's time.
        Returns each batch's topic, partition and delivery future, in the order sent."""
        by_partition: dict[tuple[str, int], list[Send]] = {}
        for r in records:
            partition = r.partition
            if partition is None:
                count = self._partitions.get(r.topic)
                if count is None:
                    count = self._partitions[r.topic] = len(await producer.partitions_for(r.topic))
                partition = partition_for(r.key.decode("utf-8"), count) if r.key is not None else 0
            by_partition.setdefault((r.topic, partition), []).append(r)
        delivered = []
        for (topic, partition), sends in by_partition.items():
            batch = producer.create_batch()
            for r in sends:
                while batch.append(key=r.key, value=r.value, timestamp=r.timestamp_ms, headers=r.headers or []) is None:
                    # full: the record starts the next batch
                    delivered.append((topic, partition, await _send_now(producer, batch, topic, partition)))
                    batch = producer.create_batch()
            delivered.append((topic, partition, await _send_now(producer, batch, topic, partition)))
        return delivered


async def _send_now(producer: Any, batch: Any, topic: str, partition: int) -> asyncio.Future[Any]:
    """Hand a record batch to the producer closed (an open one waits out the producer's linger, 5 ms,
    before it is sent, and a commit waits for it); its delivery future."""
    batch.close()
    return await producer.send_batch(batch, topic, partition=partition)
