"""Inputs that write nothing are placed exactly where the worker applied them (issue 39).

An acknowledgement is stale after a node's loss and not before it; a Tick at or before its namespace's clock
writes nothing and one after it does. Such an input's place cannot be read off the outputs around it, nor off
timestamps, which need not agree with the order records arrived in: each leaves a `SilentInput` naming its
position among its key's inputs, and the applied order follows it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from schemas.records import SilentInput
from streams.audit.kafka_log import KafkaLog, replay_log, within
from streams.audit.order import applied_order, chains_from, coordinates, named_cause
from streams.core import dispatch, shards
from streams.core.outputs import SILENT_INPUTS
from streams.core.source import SourceRecord
from streams.replay.replayer import Replayer
from tests.audit.test_order import scope_of, worker

TOPICS = [*shards.INPUTS, *dispatch.INPUTS]
T = 1_800_000_000_000


class Log:
    """Records as producers write them: per topic partition in offset order, each with the timestamp given."""

    def __init__(self) -> None:
        self.records: list[SourceRecord] = []
        self._offsets: dict[str, int] = {}

    def add(self, topic: str, key: str, value: dict[str, Any], at: int) -> SourceRecord:
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        record = SourceRecord(topic, 0, offset, at, key.encode(), json.dumps(value).encode())
        self.records.append(record)
        return record


def recovered(records: list[SourceRecord], recorded: dict[tuple[str, str], list[bytes]]) -> list[SourceRecord]:
    """The order replay applies `records` in, from what the worker recorded (records given in log order)."""
    by_time = sorted(records, key=lambda r: (r.timestamp, TOPICS.index(r.topic), r.offset))
    causes = [list(map(named_cause, values)) for values in recorded.values()]
    return applied_order(by_time, chains_from(causes, records, scope_of), TOPICS, scope_of)


def test_a_stale_ack_stamped_before_the_loss_it_follows_is_replayed_after_it() -> None:
    """The issue's case: the ack for epoch 3 arrives after n2's loss (epoch 4) but is stamped 80 ms before it."""
    log = Log()
    events, acks = shards.SHARD_EVENTS, shards.SHARD_ACKS
    log.add(events, "js", {"type": "TaskCountSet", "job_set": "js", "tasks": 12}, T)
    log.add(events, "js", {"type": "NodeJoined", "job_set": "js", "node": "n1", "address": "h:1"}, T + 10)
    log.add(events, "js", {"type": "NodeJoined", "job_set": "js", "node": "n2", "address": "h:2"}, T + 20)
    lost = log.add(events, "js", {"type": "NodeLost", "job_set": "js", "node": "n2"}, T + 1_000)
    stale = log.add(acks, "js", {"type": "ShardAck", "job_set": "js", "node": "n2", "epoch": 3}, T + 920)
    recorded = worker(log.records)  # the order it was produced in: the ack after the loss
    silent = [json.loads(v) for v in recorded[(SILENT_INPUTS, "shards/js")]]
    assert [(s["cause"]["topic"], s["cause"]["offset"], s["cause"]["position"]) for s in silent] == [(acks, 0, 5)]
    SilentInput.model_validate(silent[0])
    by_time = sorted(log.records, key=lambda r: r.timestamp)
    assert by_time.index(stale) < by_time.index(lost)  # what replay did before: the ack first, a plan never written
    assert worker(by_time) != recorded
    ordered = recovered(log.records, recorded)
    assert ordered.index(stale) > ordered.index(lost)
    assert worker(ordered) == recorded


def test_a_tick_at_the_clock_a_command_moved_is_replayed_where_it_was_applied() -> None:
    """A Tick stamped in the command's millisecond wrote nothing after the command; before it, it would have."""
    log = Log()
    commands, ticks = dispatch.DISPATCH_COMMANDS, dispatch.TICKS
    log.add(commands, "ns", {"type": "JobsAssigned", "namespace": "ns", "worker": "w", "start": T, "end": T,
                             "jobs": [{"external_id": "j", "info": "", "max_retries": 0, "timeout_ms": 500}]}, T)
    assign = log.add(commands, "ns", {"type": "JobsAssigned", "namespace": "ns", "worker": "w", "start": T + 90,
                                      "end": T + 90, "jobs": [{"external_id": "k", "info": "", "max_retries": 0,
                                                               "timeout_ms": 500}]}, T + 5)
    tick = log.add(ticks, "ns", {"type": "Tick", "namespace": "ns", "now": T + 5}, T + 5)
    recorded = worker(log.records)
    assert [json.loads(v)["cause"]["offset"] for v in recorded[(SILENT_INPUTS, "dispatch/ns")]] == [tick.offset]
    ordered = recovered(log.records, recorded)
    assert ordered.index(tick) > ordered.index(assign)
    assert worker(ordered) == recorded


def shard_and_dispatch_inputs(rng: random.Random, count: int) -> list[SourceRecord]:
    """Two job sets' membership and acks (many stale: for epochs already replaced, or said twice), and two
    namespaces' commands and ticks (many at or before the clock), with timestamps in a narrow window so that
    they disagree with the order they were produced in."""
    log = Log()
    epochs = {"a": 0, "b": 0}
    for _ in range(count):
        at = T + rng.randrange(40)
        kind = rng.random()
        if kind < 0.5:
            job_set = rng.choice(["a", "b"])
            node = rng.choice(["n1", "n2", "n3"])
            if kind < 0.25:
                event: dict[str, Any] = rng.choice([
                    {"type": "NodeJoined", "job_set": job_set, "node": node, "address": f"h:{node}"},
                    {"type": "NodeLost", "job_set": job_set, "node": node},
                    {"type": "TaskCountSet", "job_set": job_set, "tasks": rng.randrange(4, 9)}])
                log.add(shards.SHARD_EVENTS, job_set, event, at)
                epochs[job_set] += 1  # at most: a stale guess for the acks below is what they should be
            else:
                epoch = max(1, epochs[job_set] - rng.randrange(3))
                log.add(shards.SHARD_ACKS, job_set, {"type": "ShardAck", "job_set": job_set, "node": node,
                                                     "epoch": epoch}, at)
        else:
            namespace = rng.choice(["x", "y"])
            if kind < 0.75:
                log.add(dispatch.TICKS, namespace, {"type": "Tick", "namespace": namespace, "now": at}, at)
            else:
                n = rng.randrange(3)
                log.add(dispatch.DISPATCH_COMMANDS, namespace, {
                    "type": "JobsAssigned", "namespace": namespace, "worker": rng.choice(["w1", "w2"]),
                    "start": at, "end": at + rng.randrange(20),
                    "jobs": [{"external_id": f"j{log.records.__len__()}-{i}", "info": "", "max_retries": 1,
                              "timeout_ms": rng.randrange(1, 15)} for i in range(n)]}, at)
    return log.records


def any_arrival(rng: random.Random, records: list[SourceRecord],
                queue: Callable[[SourceRecord], tuple[str, int]]) -> list[SourceRecord]:
    queues: dict[tuple[str, int], list[SourceRecord]] = {}
    for r in records:
        queues.setdefault(queue(r), []).append(r)
    arrival = []
    while queues:
        k = rng.choice(sorted(queues))
        arrival.append(queues[k].pop(0))
        if not queues[k]:
            del queues[k]
    return arrival


@given(st.integers(0, 2**32), st.integers(1, 120))
def test_any_interleaving_of_silent_and_loud_inputs_is_replayed_as_the_worker_applied_it(seed: int,
                                                                                         count: int) -> None:
    rng = random.Random(seed)
    records = shard_and_dispatch_inputs(rng, count)
    arrival = any_arrival(rng, records, lambda r: (r.topic, r.partition))
    recorded = worker(arrival)
    ordered = recovered(records, recorded)
    assert sorted(map(coordinates, ordered)) == sorted(map(coordinates, records))
    assert worker(ordered) == recorded


def test_a_log_written_before_silent_inputs_verifies_as_it_did_and_one_with_them_must_have_them_all() -> None:
    log = Log()
    for i, node in enumerate(["n1", "n2"]):
        log.add(shards.SHARD_EVENTS, "js", {"type": "NodeJoined", "job_set": "js", "node": node, "address": "h"}, T + i)
    log.add(shards.SHARD_ACKS, "js", {"type": "ShardAck", "job_set": "js", "node": "n1", "epoch": 1}, T + 5)
    recorded = {k: [SourceRecord(k[0], 0, i, 0, k[1].encode(), v) for i, v in enumerate(vs)]
                for k, vs in worker(log.records).items()}
    assert (SILENT_INPUTS, "shards/js") in recorded
    assert replay_log(log.records, Replayer(), within(None, None), recorded).divergence is None
    older = {k: v for k, v in recorded.items() if k[0] != SILENT_INPUTS}
    assert replay_log(log.records, Replayer(), within(None, None), older).divergence is None
    other = {**older, (SILENT_INPUTS, "dispatch/x"): recorded[(SILENT_INPUTS, "shards/js")]}
    result = replay_log(log.records, Replayer(), within(None, None), other)
    assert result.divergence is not None and result.divergence.stream == (SILENT_INPUTS, "shards/js")


def recorded_records(streams: dict[tuple[str, str], list[bytes]]) -> dict[tuple[str, str], list[SourceRecord]]:
    return {k: [SourceRecord(k[0], 0, i, 0, k[1].encode(), v) for i, v in enumerate(vs)] for k, vs in streams.items()}


@given(st.integers(0, 2**32), st.integers(1, 120))
def test_a_log_read_while_the_worker_runs_verifies_up_to_what_it_settled(seed: int, count: int) -> None:
    """The inputs read up to one moment (a prefix of each partition), the outputs of what the worker applied up to
    another (a prefix of its arrival order): the cut compares what both hold, and agrees."""
    rng = random.Random(seed)
    records = shard_and_dispatch_inputs(rng, count)
    arrival = any_arrival(rng, records, lambda r: (r.topic, r.partition))
    applied = arrival[:rng.randint(0, len(arrival))]
    ends = {t: rng.randint(0, sum(r.topic == t for r in records)) for t in TOPICS}
    read = [r for r in records if r.offset < ends[r.topic]]
    log = KafkaLog(read, recorded_records(worker(applied)), TOPICS)
    cut = log.cut()
    result = replay_log(cut.ordered, Replayer(), within(None, None), cut.recorded)
    assert result.divergence is None, result.divergence.describe()
    settled = {coordinates(r) for r in applied} & {coordinates(r) for r in read}
    assert {coordinates(r) for r in cut.ordered} <= settled
    assert cut.inputs_left == len(read) - len(cut.ordered)


def test_a_log_read_while_the_worker_runs_is_compared_only_as_far_as_both_hold() -> None:
    log = Log()
    events, acks = shards.SHARD_EVENTS, shards.SHARD_ACKS
    for i, node in enumerate(["n1", "n2", "n3"]):
        log.add(events, "js", {"type": "NodeJoined", "job_set": "js", "node": node, "address": "h"}, T + i)
    log.add(acks, "js", {"type": "ShardAck", "job_set": "js", "node": "n1", "epoch": 3}, T + 5)
    recorded = recorded_records(worker(log.records))
    ahead = KafkaLog(log.records[:2], recorded, TOPICS)  # the inputs read before the third join was appended
    assert replay_log(ahead.ordered(), Replayer(), within(None, None), recorded).divergence is not None
    cut = ahead.cut()
    assert (len(cut.ordered), cut.inputs_left, cut.outputs_left) == (2, 0, 2)
    assert replay_log(cut.ordered, Replayer(), within(None, None), cut.recorded).divergence is None
    behind = KafkaLog(log.records, recorded_records(worker(log.records[:3])), TOPICS)  # the ack not applied yet
    assert replay_log(behind.ordered(), Replayer(), within(None, None), behind.recorded).divergence is not None
    cut = behind.cut()
    assert (len(cut.ordered), cut.inputs_left, cut.outputs_left) == (3, 1, 0)
    assert replay_log(cut.ordered, Replayer(), within(None, None), cut.recorded).divergence is None
    assert "1 input records and 0 output records" in cut.describe()
