"""Every invariant SPEC §2 states, as hypothesis properties over random policies and event logs."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from schemas.decisions import ScalingDecision
from streams.core.pools.verdicts import DeciderState
from tests.core.pools.builders import Log

NAMES = ["ats", "hadoop", "redis", "spark", "kafka", "mysql"]


@st.composite
def specs(draw: st.DrawFn) -> list[dict[str, Any]]:
    cuts = sorted(draw(st.sets(st.integers(1, 99), max_size=5)))
    numbers = st.integers(-10, 10)
    return [{"Metrical": [lo, hi], "Number": draw(numbers)} for lo, hi in itertools.pairwise([0, *cuts, 100])]


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    apps = []
    for name in NAMES[: draw(st.integers(1, len(NAMES)))]:
        min_num = draw(st.integers(0, 3))
        max_num = draw(st.none() | st.integers(min_num, min_num + 8))
        apps.append({"App": name, "Priority": draw(st.integers(1, 10)), "MinNum": min_num, "MaxNum": max_num,
                     "release": draw(st.sampled_from(["lazy", "eager"])), "Spec": draw(specs())})
    initial = {a["App"]: draw(st.integers(a["MinNum"], a["MaxNum"] if a["MaxNum"] is not None else a["MinNum"] + 6))
               for a in apps}
    return {"kind": "decider", "version": "v1", "capacity": sum(initial.values()) + draw(st.integers(0, 6)),
            "initial": initial, "apps": apps}


metricals = st.integers(0, 100).map(float) | st.floats(0, 100, allow_nan=False)
events = st.lists(st.one_of(
    st.tuples(st.just("metric"), st.integers(0, 5), metricals, st.booleans()),
    st.tuples(st.just("metric"), st.integers(0, 5), metricals, st.booleans()),
    st.tuples(st.just("metric"), st.integers(0, 5), metricals, st.booleans()),
    st.tuples(st.just("capacity"), st.integers(0, 40)),
    st.tuples(st.just("observed"), st.integers(0, 5), st.integers(0, 12)),
), max_size=40)


def run(policy: dict[str, Any], log_events: list[tuple[Any, ...]], shout: bool = False) -> list[tuple[
        DeciderState, DeciderState, dict[str, Any]]]:
    """Fold the log; return (state before, state after, decision) for every decision after the policy."""
    log = Log()
    log.policy(policy)
    names = [a["App"] for a in policy["apps"]]
    steps = []
    for event in log_events:
        before = log.state.decider
        assert before is not None
        name = names[event[1] % len(names)] if event[0] != "capacity" else ""
        if shout and event[0] == "metric" and event[3]:
            name = name.upper()
        if event[0] == "metric":
            outputs = log.metric(name, event[2])
        elif event[0] == "capacity":
            outputs = log.event({"type": "PoolCapacitySet", "capacity": event[1]})
        else:
            outputs = log.event({"type": "InstancesObserved", "instances": {name: event[2]}})
        [out] = outputs
        after = log.state.decider
        assert after is not None
        steps.append((before, after, json.loads(out.value_bytes())))
    return steps


@given(policies(), events)
def test_invariants_hold_for_every_decision(policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    for before, after, d in run(policy, log_events):
        # every decision is a valid record of its published schema
        assert ScalingDecision.model_validate(d).model_dump(mode="json", by_alias=True, exclude_unset=True) == d
        rules = {r.name: r for r in after.policy.rules}
        # states and decisions list apps in the policy's rule order, whatever changed (same log, same bytes)
        assert list(after.instances) == list(after.metricals) == [r.key for r in after.policy.rules]
        assert list(d["instances"]) == list(d["metricals"]) == list(rules)
        # instances never exceed capacity
        assert sum(after.instances.values()) <= after.capacity
        assert d["free"] == after.capacity - sum(d["instances"].values()) >= 0
        # granted <= requested
        assert 0 <= d["granted"] <= d["requested"]
        # moves add up: each app's change is what moved in minus what moved out
        for name, rule in rules.items():
            moved = sum(m["count"] for m in d["moves"] if m["to"] == name) - \
                sum(m["count"] for m in d["moves"] if m["from"] == name)
            assert after.instances[rule.key] - before.instances[rule.key] == moved, (name, d)
        if d["trigger"]["kind"] == "metric":
            me = d["trigger"]["app"]
            assert sum(m["count"] for m in d["moves"] if m["to"] == me) == d["granted"]
        for m in d["moves"]:
            if m["round"] in ("idle", "preempt"):
                donor, taker = rules[m["from"]], rules[m["to"]]
                # nobody is pushed below MinNum by a donation or a preemption
                assert after.instances[donor.key] >= donor.min_num
                if m["round"] == "preempt":
                    # preemption takes only from strictly lower priority
                    assert donor.priority > taker.priority
                else:
                    # idle donors are idle: their metrical before the decision maps to a negative Number
                    assert donor.number(before.metricals[donor.key]) < 0
        assert d["outcome"] != "scaled" or d["granted"] == d["requested"]
        assert d["outcome"] != "rejected" or d["granted"] == 0


@given(policies(), events)
def test_same_input_gives_the_same_output_bytes(policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    def outputs() -> list[bytes]:
        return [json.dumps(d, sort_keys=False).encode() for _, _, d in run(policy, log_events)]

    assert outputs() == outputs()


@given(policies(), events)
def test_app_names_match_case_insensitively(policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    plain = [d for _, _, d in run(policy, log_events)]
    shouted = [d for _, _, d in run(policy, log_events, shout=True)]
    assert shouted == plain
