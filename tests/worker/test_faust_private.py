"""The start-up check names what a Faust upgrade moved, before any record is folded."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any

import pytest

from streams.errors import TribunalError
from streams.worker import faust_private


def test_the_pinned_faust_has_everything_tribunal_reaches_into() -> None:
    faust_private.check()


def test_a_moved_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.transport.drivers.aiokafka import Producer

    monkeypatch.delattr(Producer, "_trn_locks")
    with pytest.raises(TribunalError, match=r"Producer\._trn_locks"):
        faust_private.check()


def _service() -> Any:
    """What the replaced `Consumer.wait_first` reads of a consumer: a real mode Service and a flow event."""
    from mode import Service

    service = Service()
    service.suspend_flow = asyncio.Event()
    return service


def _wait_first() -> object:
    from faust.transport.consumer import Consumer

    faust_private.deliver_without_tasks()
    return Consumer.wait_first


def test_a_delivery_that_finds_room_runs_at_once_and_makes_no_task() -> None:
    async def scenario() -> None:
        wait_first, service = _wait_first(), _service()
        tasks = len(asyncio.all_tasks())

        async def deliver() -> str:
            assert len(asyncio.all_tasks()) == tasks  # run by the caller's task, not a new one
            return "delivered"

        delivery, suspended = deliver(), service.suspend_flow.wait()
        result = await wait_first(service, delivery, suspended)
        assert (result.done, result.results, result.stopped) == ([delivery], ["delivered"], False)
        assert inspect.getcoroutinestate(suspended) == inspect.CORO_CLOSED  # not left unawaited

    asyncio.run(scenario())


def test_a_delivery_that_has_to_wait_finishes_as_faust_would() -> None:
    async def scenario() -> None:
        wait_first, service = _wait_first(), _service()
        room = asyncio.get_running_loop().create_future()
        steps = []

        async def deliver() -> str:
            steps.append("tried")
            await asyncio.sleep(0)  # a bare yield
            steps.append("waiting for room")
            await room
            steps.append("put")
            return "delivered"

        asyncio.get_running_loop().call_later(0.01, room.set_result, None)
        result = await wait_first(service, deliver(), service.suspend_flow.wait())
        assert result.results == ["delivered"] and not result.stopped
        assert steps == ["tried", "waiting for room", "put"]

    asyncio.run(scenario())


def test_a_waiting_delivery_is_cancelled_when_the_flow_is_suspended() -> None:
    async def scenario() -> None:
        wait_first, service = _wait_first(), _service()
        seen = []

        async def deliver() -> None:
            try:
                await asyncio.get_running_loop().create_future()  # a queue that never has room
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        suspended = service.suspend_flow.wait()
        asyncio.get_running_loop().call_later(0.01, service.suspend_flow.set)
        result = await wait_first(service, deliver(), suspended)
        await asyncio.sleep(0)  # the cancelled delivery's last step
        assert result.done == [suspended]
        assert seen == ["cancelled"]

    asyncio.run(scenario())


def test_a_delivery_that_fails_at_once_raises_to_the_fetch_loop() -> None:
    async def scenario() -> None:
        wait_first, service = _wait_first(), _service()

        async def deliver() -> None:
            raise ValueError("undecodable")

        with pytest.raises(ValueError, match="undecodable"):
            await wait_first(service, deliver(), service.suspend_flow.wait())

    asyncio.run(scenario())


class _Fetching:
    """What `Consumer.on_buffer_full` reads of a consumer: the partitions its next fetch asks for."""

    def __init__(self, *tps: str) -> None:
        from types import SimpleNamespace

        self.app = SimpleNamespace(in_recovery=False)
        self.active, self._buffered_partitions = set(tps), set()

    def _get_active_partitions(self) -> set[str]:
        return self.active


def test_a_partition_whose_stream_is_full_stays_in_the_fetch_set() -> None:
    from faust.transport.consumer import Consumer

    faust_private.fetch_while_streams_are_full()
    consumer = _Fetching("in-0", "in-1")
    Consumer.on_buffer_full(consumer, "in-0")  # as the conductor calls it when a stream's buffer is 80% full
    assert consumer.active == {"in-0", "in-1"}  # Faust's own would fetch only in-1 (and wait out a second)


def test_the_commit_log_table_is_drawn_only_when_the_line_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    import faust.transport.consumer
    from faust.utils import terminal

    drawn: list[tuple[Any, ...]] = []
    real = terminal.logtable
    monkeypatch.setattr(terminal, "logtable", lambda *args, **kwargs: drawn.append(args) or real(*args, **kwargs))
    monkeypatch.setattr(faust.transport.consumer, "terminal", terminal)
    faust_private.commit_without_a_table()
    rows, options = [("tp-0", "41")], {"title": "Commit Offsets", "headers": ["TP", "Offset"]}
    table = faust.transport.consumer.terminal.logtable(rows, **options)
    assert drawn == []
    assert f"{table}" == real(rows, **options) and len(drawn) == 1


def test_recovery_waits_shortly_for_its_next_changelog_record_and_no_other_wait_changes() -> None:
    import faust.tables.recovery

    faust_private.recover_past_aborted_transactions_soon()
    shim = faust.tables.recovery.asyncio

    async def waits() -> tuple[bool, int]:
        late: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(1.0, late.set_result, 7)
        try:
            await shim.wait_for(asyncio.shield(late), timeout=faust_private.RECOVERY_WAIT)  # shortened: times out
            shortened = False
        except TimeoutError:
            shortened = True
        return shortened, await shim.wait_for(late, timeout=3.0)  # any other wait is as asked

    assert asyncio.run(waits()) == (True, 7)
    assert shim.sleep is asyncio.sleep and shim.TimeoutError is asyncio.TimeoutError


def test_recovery_starts_without_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.tables.manager import TableManager

    monkeypatch.setattr(TableManager, "on_start", TableManager.on_start)  # Faust's own again after the test
    faust_private.recover_without_a_pause()
    steps: list[str] = []

    class Recovery:
        async def start(self) -> None:
            steps.append("recovery started")

    class Manager:
        should_stop = False
        recovery = Recovery()

        async def sleep(self, seconds: float) -> None:
            steps.append(f"slept {seconds} s")

        async def _update_channels(self) -> None:
            steps.append("changelog channels")

    asyncio.run(TableManager.on_start(Manager()))
    assert steps == ["changelog channels", "recovery started"]
    Manager.should_stop = True  # stopped before it started: nothing more (as Faust's own)
    asyncio.run(TableManager.on_start(Manager()))
    assert steps == ["changelog channels", "recovery started"]


def test_a_moved_table_manager_start_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.tables.manager import TableManager

    async def on_start(self: Any) -> None:
        await self.recovery.start()

    monkeypatch.setattr(TableManager, "on_start", on_start)
    with pytest.raises(TribunalError, match=r"TableManager\.on_start"):
        faust_private.check()


def test_the_consumer_fetches_with_a_short_wait_only_while_recovering(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import faust
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    monkeypatch.setattr(AIOKafkaConsumerThread, "_create_worker_consumer",
                        AIOKafkaConsumerThread._create_worker_consumer)  # Faust's own again after the test

    async def waits() -> list[int]:
        app = faust.App("t-fetch-wait", broker="kafka://127.0.0.1:9", processing_guarantee="exactly_once")
        faust_private.fetch_briefly_while_recovering(app, 100)
        consumer = app.consumer._thread._create_worker_consumer(app.transport)  # not started: no broker needed
        seen = [int(consumer._fetch_max_wait_ms)]  # what its fetcher starts with: a worker starts by recovering
        await consumer.stop()
        fetcher = types.SimpleNamespace(_fetch_max_wait_ms=100)  # as the started consumer's fetcher reads it
        app.consumer._thread._consumer = types.SimpleNamespace(_fetcher=fetcher)
        await app.on_rebalance_complete.send()  # recovery done
        seen.append(fetcher._fetch_max_wait_ms)
        await app.on_partitions_revoked.send(set())  # the next rebalance
        seen.append(fetcher._fetch_max_wait_ms)
        return seen

    assert asyncio.run(waits()) == [100, faust_private.FAUST_FETCH_WAIT_MS, 100]


class _Flow:
    def __init__(self) -> None:
        self.active = True

    def is_active(self) -> bool:
        return self.active


class _Channel:
    def __init__(self) -> None:
        from mode.utils.queues import FlowControlEvent, ThrowableQueue

        flow = FlowControlEvent()
        flow.resume()
        self.queue: Any = ThrowableQueue(flow_control=flow)

    async def __anext__(self) -> Any:
        return await self.queue.get()


class _Stream:
    def __init__(self) -> None:
        self.channel, self.should_stop = _Channel(), False

    async def maybe_start(self) -> bool:
        return False

    def _channel_stop_iteration(self, channel: Any) -> None:
        pass


class _App:
    def __init__(self, generation: int) -> None:
        from types import SimpleNamespace

        self.consumer = SimpleNamespace(_unacked_messages=set(), _waiting_for_ack=None, _acked={})
        self.flow_control, self.consumer_generation_id = _Flow(), generation


def _event(offset: int, generation: int) -> Any:
    from faust.events import Event
    from faust.types.tuples import Message

    message = Message("in", 0, offset, 0.0, 0, [], b"k", b"v", None, generation_id=generation)
    return Event(None, b"k", b"v", [], message)  # type: ignore[arg-type]


def test_an_agent_gets_the_current_generations_events_each_tracked_while_handled() -> None:
    from faust.streams import _current_event

    async def scenario() -> list[int]:
        app, stream = _App(generation=2), _Stream()
        for offset, generation in ((0, 1), (1, 2), (2, 2), (3, 1), (4, 2)):
            stream.channel.queue.put_nowait(_event(offset, generation))
        handled, held = [], []
        async with contextlib.aclosing(faust_private.events(app, stream)) as events:
            async for event in events:
                held.append(set(app.consumer._unacked_messages) == {event.message} and _current_event.get()() is event)
                handled.append(event)
                if event.message.offset == 4:
                    break
        assert all(held)  # a rebalance's wait_empty waits for the event being handled; the stores see its partition
        assert app.consumer._unacked_messages == set() and all(e.message.acked for e in handled)
        assert list(app.consumer._acked) == [handled[0].message.tp]  # Faust commits the partitions listed there
        return [e.message.offset for e in handled]

    assert asyncio.run(scenario()) == [1, 2, 4]  # delivered before a rebalance (generation 1): not handed over


def test_an_agent_gets_nothing_while_the_flow_is_suspended() -> None:
    async def scenario() -> list[int]:
        app, stream = _App(generation=1), _Stream()
        for offset in range(3):
            stream.channel.queue.put_nowait(_event(offset, 1))
        app.flow_control.active = False
        handled = []

        async def take() -> None:
            async for event in faust_private.events(app, stream):
                handled.append(event.message.offset)

        task = asyncio.create_task(take())
        await asyncio.sleep(0.05)  # the three queued events are read and skipped; then it waits for more
        app.flow_control.active = True
        stream.channel.queue.put_nowait(_event(3, 1))
        await asyncio.sleep(0.05)
        task.cancel()
        return handled

    assert asyncio.run(scenario()) == [3]



def test_a_topic_the_leaders_metadata_lacks_is_assigned_with_its_inputs_not_skipped() -> None:
    """The combined-fault day's lost partition: the leader's metadata listed the inputs but not yet their
    changelogs; Faust's assignor skipped the changelogs and the inputs went out without them."""
    from aiokafka.cluster import ClusterMetadata
    from aiokafka.protocol.metadata import MetadataResponse_v0
    from faust.assignor.partition_assignor import PartitionAssignor

    inputs, changelog = "t.plugin_decider", "t-pool-state-changelog"
    cluster = ClusterMetadata()
    cluster.update_metadata(MetadataResponse_v0([(0, "127.0.0.1", 9092)], [
        (0, inputs, [(0, p, 0, [0], [0]) for p in range(4)])]))
    subscriptions = {"m1": [inputs, changelog], "m2": [inputs, changelog]}

    skipped = PartitionAssignor._get_copartitioned_groups({inputs, changelog}, cluster, subscriptions)
    assert sorted(t for group in skipped[4] for t in group) == [inputs]  # Faust alone: the changelog left out

    seen = faust_private._Declared(cluster, 4)
    groups = PartitionAssignor._get_copartitioned_groups({inputs, changelog}, seen, subscriptions)
    assert list(groups) == [4] and sorted(t for group in groups[4] for t in group) == [changelog, inputs]
    assert seen.partitions_for_topic(inputs) == {0, 1, 2, 3} and seen.brokers() == cluster.brokers()


def test_the_leader_assigns_through_the_view_that_knows_every_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.assignor.partition_assignor import PartitionAssignor

    given: list[Any] = []
    original = faust_private._ORIGINALS.get("PartitionAssignor._perform_assignment",
                                            PartitionAssignor._perform_assignment)
    monkeypatch.setitem(faust_private._ORIGINALS, "PartitionAssignor._perform_assignment",
                        lambda self, cluster, members: given.append(cluster) or {})
    monkeypatch.setattr(PartitionAssignor, "_perform_assignment", original)
    faust_private.assign_topics_missing_from_metadata()

    class App:
        class conf:  # Faust's attribute
            topic_partitions = 3

    assignor = object.__new__(PartitionAssignor)
    assignor.app = App()  # type: ignore[assignment]
    assert PartitionAssignor._perform_assignment(assignor, "the cluster", {}) == {}
    assert isinstance(given[0], faust_private._Declared) and given[0].partitions == 3


def _join_answered(code: int) -> Any:
    """aiokafka's own group join, its coordinator answering a JoinGroup with Kafka error `code` (the broker's
    answer, as aiokafka decodes it: a JoinGroupResponse; nothing else of the coordinator is read)."""
    import types

    from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.protocol.group import JoinGroupResponse_v5

    async def _send_req(request: Any) -> Any:
        return JoinGroupResponse_v5(0, code, -1, "", "", "", [])

    coordinator = types.SimpleNamespace(member_id="", _group_instance_id=None, _send_req=_send_req,
                                        _rebalance_timeout_ms=30_000)
    subscription = types.SimpleNamespace(topics={"t"}, active=True)
    return CoordinatorGroupRebalance(coordinator, "g", 1, subscription, [RangePartitionAssignor], 10_000, 100)


def test_a_join_answered_rebalance_in_progress_joins_again_and_other_errors_still_raise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka import errors
    from aiokafka.consumer.group_coordinator import CoordinatorGroupRebalance

    monkeypatch.setattr(CoordinatorGroupRebalance, "perform_group_join", CoordinatorGroupRebalance.perform_group_join)
    rebalancing = errors.RebalanceInProgressError.errno
    with pytest.raises(errors.KafkaError, match="RebalanceInProgressError"):  # aiokafka alone: the hang's cause
        asyncio.run(_join_answered(rebalancing).perform_group_join())
    faust_private.rejoin_when_the_group_is_rebalancing()
    assert asyncio.run(_join_answered(rebalancing).perform_group_join()) is None  # aiokafka backs off, joins again
    with pytest.raises(errors.KafkaError, match="IllegalGenerationError"):
        asyncio.run(_join_answered(errors.IllegalGenerationError.errno).perform_group_join())


def test_transactional_producers_of_an_assignment_start_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each start is a round trip to the transaction coordinator: the assignment waits for the slowest, not the
    sum (Faust's own `_start_transactions` begins one id after the other)."""
    import types

    from faust.transport.consumer import TransactionManager

    monkeypatch.setattr(TransactionManager, "_start_transactions", TransactionManager._start_transactions)
    begun: list[str] = []
    waiting = [0, 0]  # now, most at once

    async def maybe_begin_transaction(tid: str) -> None:
        waiting[0] += 1
        waiting[1] = max(waiting[1], waiting[0])
        await asyncio.sleep(0.01)  # the coordinator's answer
        waiting[0] -= 1
        begun.append(tid)

    producer = types.SimpleNamespace(maybe_begin_transaction=maybe_begin_transaction)
    manager: Any = types.SimpleNamespace(producer=producer)
    tids = ["a-0", "a-1", "a-2", "a-3"]
    asyncio.run(TransactionManager._start_transactions(manager, tids))
    assert waiting[1] == 1 and begun == tids  # Faust's: in turn
    faust_private.start_transactions_at_once()
    begun.clear()
    asyncio.run(TransactionManager._start_transactions(manager, tids))
    assert waiting[1] == 4 and sorted(begun) == tids



def test_a_busy_partition_whose_records_wait_holds_its_brokers_next_fetch_until_they_are_taken(
        kafka: str, unique: str) -> None:
    """aiokafka's own fetcher, 0.1 s after a reader left a partition's records untaken, fetches the other
    partitions without it, and the broker holds that fetch for want of data (1.5 s, Faust's wait): the busy
    partition, read meanwhile, waits it out. Patched, no fetch leaves out a partition the reader reads."""
    faust_private.fetch_busy_partitions_together()
    asyncio.run(_a_slow_reader(kafka, unique, reads_busy=True))


def test_a_partition_the_reader_has_paused_holds_no_fetch_back(kafka: str, unique: str) -> None:
    """A partition Faust has taken out of the set it reads (paused for recovery) never has its records taken: it
    must not hold the fetches of the partitions Faust does read (the changelogs being recovered)."""
    faust_private.fetch_busy_partitions_together()
    asyncio.run(_a_slow_reader(kafka, unique, reads_busy=False))


async def _a_slow_reader(bootstrap: str, prefix: str, reads_busy: bool) -> None:
    """A consumer of a busy and an idle partition whose busy records wait untaken for half a second; then, if
    `reads_busy`, it takes them and reads one more, else it reads the idle partition alone."""
    from aiokafka import TopicPartition

    from streams import kafka
    from tests.helpers import create_topic

    busy, idle = TopicPartition(f"{prefix}.busy", 0), TopicPartition(f"{prefix}.idle", 0)
    for tp in (busy, idle):
        await create_topic(bootstrap, tp.topic, {}, partitions=1)
    producer = kafka.producer(bootstrap)
    consumer = kafka.consumer(bootstrap, fetch_max_wait_ms=1500, auto_offset_reset="earliest")
    await producer.start()
    try:
        for _ in range(50):
            await producer.send(busy.topic, b"x", key=b"k")
        await producer.flush()
        consumer.assign([busy, idle])
        await consumer.start()
        if not reads_busy:
            assert await consumer.getmany(idle, timeout_ms=10) == {}  # the reader's set: the idle partition alone
        fetched: list[set[str]] = []  # the topics of each fetch sent
        send = consumer._client.send

        async def spy(node: int, request: Any, *args: Any, **kwargs: Any) -> Any:
            if type(request).__name__ == "FetchRequest":
                fetched.append({topic for topic, _ in request.topics})
            return await send(node, request, *args, **kwargs)

        consumer._client.send = spy
        for _ in range(1000):  # until the busy partition's records wait in the fetcher, untaken
            if busy in consumer._fetcher._records:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the busy partition's records never arrived")
        since = len(fetched)
        await asyncio.sleep(0.5)  # a slow reader: five times aiokafka's prefetch back-off
        if not reads_busy:  # fetched without the paused partition, as aiokafka would
            assert {idle.topic} in fetched[since:], fetched[since:]
            return
        assert all(busy.topic in topics for topics in fetched[since:]), fetched[since:]  # aiokafka's: {idle} alone
        assert len((await consumer.getmany(timeout_ms=1000))[busy]) == 50
        await producer.send_and_wait(busy.topic, b"y", key=b"k")
        more: list[Any] = []
        for _ in range(50):
            more += (await consumer.getmany(timeout_ms=100)).get(busy, [])
            if more:
                break
        assert [r.value for r in more] == [b"y"]
        assert fetched[since:] and all(busy.topic in topics for topics in fetched[since:]), fetched[since:]
    finally:
        await consumer.stop()
        await producer.stop()
