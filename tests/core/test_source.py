"""Which state a record belongs to, and redelivery per (topic, partition), in every fold (SPEC §7).

Each case here is a defect found by replaying generated logs: before the fix, redelivery was one
offset per *topic*, so a key whose records came from two partitions lost records, and a keyless
limits event was folded into `default` while its outputs named another group.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.clients import envelope
from streams.core import groups, pools
from streams.core.folds import FOLDS, scope
from streams.core.source import SourceRecord, record_key
from streams.replay import replay_lines
from streams.replay.replayer import Replayer
from tests.core.pools.builders import seed_policy


def row(topic: str, partition: int, offset: int, timestamp: int, key: str | None, value: Any) -> str:
    return json.dumps({"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
                       "key": key, "value": value})


def metric(app: str, metrical: float) -> dict[str, str]:
    return json.loads(envelope(app, metrical, pools.PLUGIN_DECIDER))


def outputs(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in replay_lines(lines)]


def test_a_pools_metrics_from_two_partitions_are_each_decided() -> None:
    """The issue's three lines: the second metric, on partition 0 at a lower offset, was dropped."""
    got = outputs([row("policies", 0, 0, 1, "p", seed_policy()),
                   row("plugin_decider", 1, 7, 2, "p", metric("ats", 40)),
                   row("plugin_decider", 0, 3, 3, "p", metric("ats", 45))])
    decisions = [o["value"] for o in got if o["topic"] == "scaling-decisions"]
    assert [(d["seq"], d["cause"]["partition"], d["cause"]["offset"]) for d in decisions] == \
        [(1, 0, 0), (2, 1, 7), (3, 0, 3)]
    assert [d["trigger"]["metrical"] for d in decisions[1:]] == [40, 45]


def test_a_redelivered_record_is_still_recognised_per_partition() -> None:
    lines = [row("policies", 0, 0, 1, "p", seed_policy()), row("plugin_decider", 1, 7, 2, "p", metric("ats", 40))]
    # a decision each, and the policy's instances of 2 apps; the same (topic, partition, offset) again: nothing
    assert len(outputs([*lines, lines[1]])) == 2 + 2


def test_keyless_job_events_from_two_partitions_are_both_counted() -> None:
    """Two keyless JobCreated (j1 on partition 1 offset 5, j2 on partition 0 offset 0): K was 1."""
    replayer = Replayer()
    for partition, offset, job in ((1, 5, "j1"), (0, 0, "j2")):
        value = json.dumps({"type": "JobCreated", "group": "default", "job": job}).encode()
        rows = replayer.feed(SourceRecord(groups.JOB_EVENTS, partition, offset, offset, None, value))
        assert any(r.topic == groups.GROUP_HEALTH for r in rows)
    assert replayer.states[("groups", "default")].K == 2


def test_a_keyless_limits_event_is_folded_into_the_group_it_names() -> None:
    replayer = Replayer()
    value = json.dumps({"type": "JobCreated", "group": "other", "job": "j1"}).encode()
    rows = replayer.feed(SourceRecord(groups.JOB_EVENTS, 0, 0, 0, None, value))
    assert {r.key for r in rows} == {"other"} and groups.GROUP_HEALTH in {r.topic for r in rows}
    assert replayer.states[("groups", "other")].K == 1
    assert ("groups", "default") not in replayer.states


def test_a_keyed_limits_event_naming_another_group_is_dead_lettered_in_that_group() -> None:
    replayer = Replayer()
    value = json.dumps({"type": "JobCreated", "group": "other", "job": "j1"}).encode()
    [dead] = replayer.feed(SourceRecord(groups.JOB_EVENTS, 0, 0, 0, b"g", value))
    letter = json.loads(dead.value)
    assert (dead.topic, dead.key, letter["reason_code"]) == ("job-events.dlq", "other", "group_mismatch")
    assert replayer.states[("groups", "other")].K == 0 and ("groups", "g") not in replayer.states


def test_a_keyless_cluster_event_is_folded_into_the_pool_it_names() -> None:
    replayer = Replayer()
    replayer.feed(SourceRecord(pools.POLICIES, 0, 0, 0, b"p", json.dumps(seed_policy()).encode()))
    event = json.dumps({"type": "PoolCapacitySet", "pool": "p", "capacity": 12}).encode()
    [out] = replayer.feed(SourceRecord(pools.CLUSTER_EVENTS, 2, 0, 1, None, event))
    assert (out.topic, out.key, json.loads(out.value)["capacity"]) == ("scaling-decisions", "p", 12)
    [dead] = replayer.feed(SourceRecord(pools.CLUSTER_EVENTS, 2, 1, 2, b"q", event))
    assert (dead.key, json.loads(dead.value)["reason_code"]) == ("p", "pool_mismatch")


def test_every_fold_names_a_key_for_any_bytes() -> None:
    for fold in FOLDS:
        for topic in fold.inputs:
            for key, value in ((None, None), (b"\xff", b"\xff"), (None, b"[1]"), (b"k", b'{"group": 5}')):
                assert isinstance(fold.key_of(SourceRecord(topic, 0, 0, 0, key, value), topic), str)


@given(st.one_of(st.none(), st.binary(max_size=8), st.sampled_from([b"pool-a", b"\xff", b"k" * 1100])),
       st.one_of(st.none(), st.binary(max_size=8),
                 st.sampled_from([b'{"pool": "b"}', b'{"group": "g", "namespace": "n", "job_set": "j"}', b"[1]"])))
def test_a_keyed_input_belongs_to_the_state_its_own_key_names_whatever_its_value(key: bytes | None,
                                                                                 value: bytes | None) -> None:
    """`Fold.keyed`: a replay on several processes routes these inputs' lines by their key alone, without building
    their records."""
    assert any(fold.keyed for fold in FOLDS)
    for fold in FOLDS:
        assert fold.keyed <= set(fold.inputs)
        for topic in fold.keyed:
            record = SourceRecord(topic, 0, 0, 0, key, value)
            assert fold.key_of(record, topic) == record_key(record)


def _mixed_log(rng: random.Random, count: int) -> list[SourceRecord]:
    """Pools and groups, keyed or not, on any of four partitions; offsets rise per partition."""
    offsets: Counter[tuple[str, int]] = Counter()
    records = []
    for i in range(count):
        pool_id = rng.choice(["a", "b", "default"])
        group = rng.choice(["g", "h", "default"])
        kind = rng.random()
        if kind < 0.1:
            topic, key, value = pools.POLICIES, pool_id, json.dumps(seed_policy()).encode()
        elif kind < 0.6:
            topic, key, value = pools.PLUGIN_DECIDER, pool_id, envelope("ats", rng.randrange(101), pools.PLUGIN_DECIDER)
        elif kind < 0.8:
            topic, key = groups.JOB_EVENTS, group
            value = json.dumps({"type": "JobCreated", "group": group, "job": f"j{i}"}).encode()
        else:
            topic, key = groups.SCHEDULER_EVENTS, group
            value = json.dumps({"type": "SchedulerRegistered", "group": group, "scheduler": f"s{i % 3}"}).encode()
        partition = rng.randrange(4)
        offset = offsets[(topic, partition)]
        offsets[(topic, partition)] += rng.randrange(1, 3)  # holes, as compaction and markers leave
        keyless = key == "default" or (rng.random() < 0.3 and topic in groups.INPUTS)
        records.append(SourceRecord(topic, partition, offset, i, None if keyless else key.encode(), value))
    return records


@given(st.integers(0, 2**32), st.integers(1, 150))
def test_any_log_gives_one_answer_per_input_and_one_state_per_key(seed: int, count: int) -> None:
    """Keys spanning partitions, keyless or not: every input is answered (decision, health record or
    dead letter) exactly once, and every output is keyed by the one state its input names."""
    records = _mixed_log(random.Random(seed), count)
    replayer = Replayer()
    answered: Counter[tuple[str, int, int]] = Counter()
    for record in records:
        where = scope(record)
        assert where is not None
        for out in replayer.feed(record):
            value = json.loads(out.value)
            cause = value["cause"]
            assert (cause["topic"], cause["partition"], cause["offset"]) == \
                (record.topic, record.partition, record.offset)
            assert out.key.split("/")[0] == where[1]
            if out.topic in ("scaling-decisions", "group-health") or out.topic.endswith(".dlq"):
                answered[(record.topic, record.partition, record.offset)] += 1
        for again in replayer.feed(record):  # a redelivery yields nothing
            raise AssertionError(f"redelivered {record} yielded {again}")
    assert sorted(answered) == sorted((r.topic, r.partition, r.offset) for r in records)
    assert set(answered.values()) == {1}


def test_a_key_past_the_limit_is_unreadable_and_a_named_one_is_ignored() -> None:
    from streams.core.source import MAX_KEY_BYTES, UNREADABLE_KEY, named_key, record_key

    def record(key: bytes, value: bytes = b"{}") -> SourceRecord:
        return SourceRecord("job-events", 0, 0, 0, key, value)

    assert record_key(record(b"k" * MAX_KEY_BYTES)) == "k" * MAX_KEY_BYTES
    assert record_key(record(b"k" * (MAX_KEY_BYTES + 1))) == UNREADABLE_KEY
    long_group = json.dumps({"group": "g" * (MAX_KEY_BYTES + 1)}).encode()
    assert named_key(record(b"g", long_group), "group") is None
