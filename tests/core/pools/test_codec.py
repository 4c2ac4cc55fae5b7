"""Pool state survives the trip through the worker's tables: load(dump(s)) folds on exactly like s."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given

from streams.core import pools
from streams.core.pools import codec
from tests.core.pools.builders import Log
from tests.core.pools.test_decider_properties import events, policies
from tests.core.pools.test_justice import justice_policy


def fold(log: Log, names: list[str], log_events: list[tuple[Any, ...]]) -> list[bytes]:
    out: list[bytes] = []
    for event in log_events:
        if event[0] == "metric":
            outputs = log.metric(names[event[1] % len(names)], event[2])
            outputs += log.metric("ats", event[2], pools.PLUGIN_JUSTICE)
        elif event[0] == "capacity":
            outputs = log.event({"type": "PoolCapacitySet", "capacity": event[1]})
        else:
            outputs = log.event({"type": "InstancesObserved", "instances": {names[event[1] % len(names)]: event[2]}})
        out += [o.value_bytes() for o in outputs]
    return out


@given(policies(), events, events)
def test_a_restored_pool_folds_on_byte_for_byte(policy: dict[str, Any], first: list[Any], then: list[Any]) -> None:
    names = [a["App"] for a in policy["apps"]]
    straight, restarted = Log(), Log()
    for log in (straight, restarted):
        log.policy(policy)
        log.policy(justice_policy())
        fold(log, names, first)
    # Through JSON, as the tables' changelogs carry it.
    policies_json = json.loads(json.dumps(codec.dump_policies(restarted.state)))
    state_json = json.loads(json.dumps(codec.dump_state(restarted.state)))
    restarted.state = codec.load(state_json, policies_json)
    assert restarted.state == straight.state
    assert fold(restarted, names, then) == fold(straight, names, then)


def test_policies_changed_only_when_a_policy_record_applied() -> None:
    log = Log()
    before = log.state
    log.policy({"kind": "decider", "version": "v", "capacity": 4, "apps": [
        {"App": "a", "Priority": 1, "MinNum": 1, "Spec": [{"Metrical": [0, 100], "Number": 1}]}]})
    assert codec.policies_changed(before, log.state)
    before = log.state
    log.metric("a", 70)
    assert not codec.policies_changed(before, log.state)
