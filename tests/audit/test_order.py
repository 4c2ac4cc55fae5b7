"""The applied order recovered from outputs reproduces them, for any interleaving a worker may have seen."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Hashable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.audit.kafka_log import Bound, replay_log, within
from streams.audit.order import Coordinates, applied_order, chains_from, coordinates, log_order, named_cause
from streams.clients import envelope
from streams.core import pools
from streams.core.folds import scope
from streams.core.source import SourceRecord
from streams.errors import ConfigError
from streams.replay.replayer import Replayer
from tests.core.pools.builders import seed_policy
from tests.core.pools.test_justice import justice_policy

TOPICS = [*pools.INPUTS]


def inputs_for(rng: random.Random, count: int, spread: bool = False) -> list[SourceRecord]:
    """Records of two pools over the four input topics, each partition in offset order.

    With `spread`, any pool's records land on any of three partitions, and some have no key (pool
    `default`): what keyless or foreign-partitioned producers write.
    """
    offsets: dict[tuple[str, int], int] = {}
    out = []
    for _ in range(count):
        pool_id = rng.choice(["p1", "p2", "default"] if spread else ["p1", "p2"])
        partition = rng.randrange(3) if spread else 0 if pool_id == "p1" else 1
        kind = rng.random()
        if kind < 0.1:
            topic, value = pools.POLICIES, json.dumps(rng.choice([seed_policy(), justice_policy()])).encode()
        elif kind < 0.2:
            topic, value = pools.CLUSTER_EVENTS, json.dumps({"type": "PoolCapacitySet",
                                                            "capacity": rng.randrange(8, 14)}).encode()
        elif kind < 0.8:
            topic, value = pools.PLUGIN_DECIDER, envelope(rng.choice(["ats", "hadoop", "nope"]), rng.randrange(101),
                                                          pools.PLUGIN_DECIDER)
        else:
            topic, value = pools.PLUGIN_JUSTICE, envelope("ats", rng.randrange(101), pools.PLUGIN_JUSTICE)
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        key = None if pool_id == "default" and rng.random() < 0.7 else pool_id.encode()
        out.append(SourceRecord(topic, partition, offset, 1_000 + rng.randrange(50), key, value))
    return out


def scope_of(record: SourceRecord) -> tuple[str, str]:
    found = scope(record)
    assert found is not None
    return found


def worker(records: list[SourceRecord]) -> dict[tuple[str, str], list[bytes]]:
    """What a worker records when it applies `records` in this order."""
    replayer = Replayer()
    streams: dict[tuple[str, str], list[bytes]] = {}
    for record in records:
        for row in replayer.feed(record):
            streams.setdefault((row.topic, row.key), []).append(row.value)
    return streams


def chains(streams: dict[tuple[str, str], list[bytes]], inputs: list[SourceRecord]) -> list[list[Coordinates]]:
    return chains_from([list(map(named_cause, vs)) for vs in streams.values()], inputs, scope_of)


def arrival_and_recovery(rng: random.Random, records: list[SourceRecord],
                         queue: Callable[[SourceRecord], Hashable],
                         scope: Callable[[SourceRecord], Hashable] | None = None) -> None:
    """A worker's arrival order (any interleaving keeping each `queue` in offset order) is recovered
    from what it recorded, and replaying the recovered order records the same."""
    queues: dict[Hashable, list[SourceRecord]] = {}
    for r in records:
        queues.setdefault(queue(r), []).append(r)
    arrival = []
    while queues:
        k = rng.choice(sorted(queues, key=repr))
        arrival.append(queues[k].pop(0))
        if not queues[k]:
            del queues[k]
    recorded = worker(arrival)
    shuffled = records[:]
    rng.shuffle(shuffled)
    ordered = applied_order(shuffled, chains(recorded, records), TOPICS, scope)
    assert sorted(map(coordinates, ordered)) == sorted(map(coordinates, records))
    assert worker(ordered) == recorded


@given(st.integers(0, 2**32), st.integers(1, 120))
def test_applied_order_reproduces_what_any_arrival_order_recorded(seed: int, count: int) -> None:
    rng = random.Random(seed)
    arrival_and_recovery(rng, inputs_for(rng, count), lambda r: (r.topic, r.partition))


@given(st.integers(0, 2**32), st.integers(1, 120))
def test_applied_order_reproduces_a_worker_that_forwarded_records_to_their_keys_partition(seed: int,
                                                                                          count: int) -> None:
    """Keys spread over partitions: the worker keeps only each (partition, key) in offset order."""
    rng = random.Random(seed)
    arrival_and_recovery(rng, inputs_for(rng, count, spread=True), lambda r: (r.topic, r.partition, scope_of(r)),
                         scope_of)


@given(st.integers(0, 2**32), st.integers(1, 120), st.booleans())
def test_without_chains_the_order_is_the_merge_a_chain_that_blocks_nothing_gives(seed: int, count: int,
                                                                                 spread: bool) -> None:
    """Nothing recorded: `applied_order` merges by heapq; it must be the order its general loop gives."""
    rng = random.Random(seed)
    records = inputs_for(rng, count, spread)
    shuffled = records[:]
    rng.shuffle(shuffled)
    blocks_nothing = [[coordinates(rng.choice(records))]]  # a chain of one record never waits
    for scoped in (None, scope_of):
        assert applied_order(shuffled, [], TOPICS, scoped) == applied_order(shuffled, blocks_nothing, TOPICS, scoped)


def as_records(streams: dict[tuple[str, str], list[bytes]]) -> dict[tuple[str, str], list[SourceRecord]]:
    return {k: [SourceRecord(k[0], 0, i, 0, k[1].encode(), v) for i, v in enumerate(vs)] for k, vs in streams.items()}


def test_replay_log_finds_a_forged_record_and_agrees_otherwise() -> None:
    records = inputs_for(random.Random(3), 80)
    ordered = log_order(records, TOPICS)
    recorded = as_records(worker(ordered))
    clean = replay_log(applied_order(records, chains(worker(ordered), records), TOPICS), Replayer(), within(None, None),
                       recorded)
    assert clean.divergence is None and clean.agreed == sum(len(v) for v in recorded.values())

    stream = max((k for k in recorded if k[0] == pools.SCALING_DECISIONS), key=lambda k: len(recorded[k]))
    forged_at = 2
    assert len(recorded[stream]) > forged_at
    original = json.loads(recorded[stream][forged_at].value or b"")
    forged: dict[str, Any] = {**original, "instances": {k: v + 1 for k, v in original["instances"].items()}}
    recorded[stream][forged_at] = SourceRecord(stream[0], 0, forged_at, 0, stream[1].encode(),
                                               json.dumps(forged).encode())
    result = replay_log(ordered, Replayer(), within(None, None), recorded)
    assert result.divergence is not None
    assert (result.divergence.stream, result.divergence.index) == (stream, forged_at)
    assert result.divergence.cause is not None and result.divergence.derived is not None
    assert json.loads(result.divergence.derived)["cause"]["offset"] == result.divergence.cause.offset
    text = result.divergence.describe()
    assert "recorded" in text and "derived" in text and "input" in text


def test_an_extra_recorded_record_is_a_divergence() -> None:
    records = inputs_for(random.Random(4), 40)
    ordered = log_order(records, TOPICS)
    recorded = as_records(worker(ordered))
    stream = next(k for k in sorted(recorded) if k[0] == pools.SCALING_DECISIONS)
    recorded[stream].append(recorded[stream][-1])
    result = replay_log(ordered, Replayer(), within(None, None), recorded)
    assert result.divergence is not None and result.divergence.derived is None
    assert result.divergence.index == len(recorded[stream]) - 1


def test_log_order_keeps_every_partition_in_offset_order() -> None:
    records = inputs_for(random.Random(5), 200)
    ordered = log_order(reversed(records), TOPICS)
    for key in {(r.topic, r.partition) for r in records}:
        offsets = [r.offset for r in ordered if (r.topic, r.partition) == key]
        assert offsets == sorted(offsets)


@pytest.mark.parametrize(("text", "bound"), [
    ("42", Bound(offset=42)), ("2026-11-22T14:02:00Z", Bound(time_ms=1_795_356_120_000)),
    ("1795356120000", Bound(time_ms=1_795_356_120_000)), (None, None)])
def test_bounds_parse_offsets_and_times(text: str | None, bound: Bound | None) -> None:
    assert Bound.parse(text) == bound


@pytest.mark.parametrize("text", ["yesterday", "2026-11-22T14:02:00"])
def test_bounds_reject_what_they_cannot_place(text: str) -> None:
    with pytest.raises(ConfigError):
        Bound.parse(text)
