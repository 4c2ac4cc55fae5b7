"""`pool-instances`: each app's decided instances, written with the decision that changed them (issue 37).

`tests.core.pools.builders.Log` checks after every record of every pool test that the latest record per app is
what the decider holds; these tests pin down when they are written, and that verify compares them.
"""

from __future__ import annotations

import json

from schemas.decisions import PoolInstances
from streams.audit.kafka_log import replay_log, within
from streams.core import pools
from streams.core.source import SourceRecord
from streams.replay.replayer import Replayer
from tests.core.pools.builders import Log, app, seed_policy


def test_a_decision_writes_the_apps_it_changed_and_only_those() -> None:
    log = Log()
    log.policy(seed_policy())
    assert {a: (v["instances"], v["seq"]) for a, v in log.desired.items()} == {"ats": (5, 1), "hadoop": (5, 1)}
    state = log.state
    _, steady = pools.apply(state, SourceRecord(pools.PLUGIN_DECIDER, 0, 99, 1, b"pool-a", json.dumps(
        {"Command": "app-metrical", "Channel": "plugin_decider", "Body": '{"App":"ats","Metrical":50}'}).encode()),
        pools.PLUGIN_DECIDER)
    assert [o.stream for o in steady] == [pools.SCALING_DECISIONS]  # steady: nothing changed, nothing written
    log.metric("ats", 90)  # ats grows by taking from hadoop
    assert {a: v["instances"] for a, v in log.desired.items()} == {"ats": 8, "hadoop": 2}
    PoolInstances.model_validate(log.desired["ats"])


def test_an_app_that_leaves_the_policy_is_set_to_zero_and_an_observe_only_pool_writes_no_change() -> None:
    log = Log()
    log.policy(seed_policy())
    smaller = {**seed_policy(), "version": "v4", "apps": [app("ats", 1, 3)], "initial": {"ats": 5}}
    log.policy(smaller)
    assert log.desired["hadoop"]["instances"] == 0 and log.desired["hadoop"]["seq"] == 2
    observing = {**seed_policy(), "version": "v5", "observe_only": True}
    log.policy(observing)
    before = dict(log.desired)
    assert log.metric("ats", 90)[0].record["mode"] == "observe"  # type: ignore[index]
    assert log.desired == before  # moves as they would be, instances unchanged: no record


def test_verify_compares_pool_instances_and_a_log_written_before_them_verifies_as_it_did() -> None:
    records: list[SourceRecord] = []
    replayer = Replayer()
    outputs: dict[tuple[str, str], list[SourceRecord]] = {}
    for i, value in enumerate([seed_policy(), {"type": "PoolCapacitySet", "capacity": 12}]):
        topic = pools.POLICIES if i == 0 else pools.CLUSTER_EVENTS
        records.append(SourceRecord(topic, 0, i, 1_700_000_000_000 + i, b"pool-a", json.dumps(value).encode()))
    for record in records:
        for out in replayer.feed(record):
            outputs.setdefault((out.topic, out.key), []).append(
                SourceRecord(out.topic, 0, len(outputs.get((out.topic, out.key), [])), 0, out.key.encode(),
                             out.value))
    assert ("pool-instances", "pool-a/ats") in outputs
    assert replay_log(records, Replayer(), within(None, None), outputs).divergence is None
    older = {k: v for k, v in outputs.items() if k[0] != pools.POOL_INSTANCES}
    assert replay_log(records, Replayer(), within(None, None), older).divergence is None
    tampered = {**outputs, ("pool-instances", "pool-a/ats"): outputs[("pool-instances", "pool-a/hadoop")]}
    result = replay_log(records, Replayer(), within(None, None), tampered)
    assert result.divergence is not None and result.divergence.stream == ("pool-instances", "pool-a/ats")
