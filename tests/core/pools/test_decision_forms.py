"""`decisions: changes` (issue 49, SPEC §2): a decision carries what it changed, and nothing else differs.

The property folds one log twice, under a policy that says `decisions: changes` and under the same policy without
it, and holds each pair of decisions against each other: the same decision; the changes form lists exactly the
apps whose instances or metrical changed (and the trigger app), at the whole form's values; the scores of the
candidates that gave, with how many were scored and their sum; and the whole pool merged from the changes, as
a client does (`Desired.after`), is the whole form's, decision by decision.
"""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from schemas.decisions import ScalingDecision
from streams.core import pools
from streams.decider.client import Desired
from tests.core.pools.builders import Log, app, decision, seed_policy
from tests.core.pools.test_decider_properties import metricals, policies

SAME = ("type", "pool", "seq", "cause", "policy_version", "trigger", "outcome", "requested", "granted", "moves",
        "capacity", "free", "reason_code", "mode", "stabilization", "stale")
AT_MIN = re.compile(r"(lower-priority apps are at MinNum(?: or cooling down)?: )([^;]*)")


def shortened(reason: str) -> str:
    """A whole-form reason as the changes form words it: the apps at MinNum, the first three and how many more."""
    def some(m: re.Match[str]) -> str:
        names = m.group(2).split(", ")
        return m.group(1) + ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return AT_MIN.sub(some, reason)


def score_sum(whole: dict[str, Any], priority: dict[str, int]) -> float:
    """The exact sum of the scores the whole form lists (100 - metrical + Priority * 10), rounded once: the
    metricals they were scored at are the decision's (preemption resets none; round 2's donors stand at 50)."""
    return float(sum(100 + 10 * priority[a] - Fraction(whole["metricals"][a]) for a in whole["scores"]))

events = st.lists(st.one_of(
    st.tuples(st.just("metric"), st.integers(0, 5), metricals),
    st.tuples(st.just("metric"), st.integers(0, 5), metricals),
    st.tuples(st.just("metric"), st.integers(0, 5), metricals),
    st.tuples(st.just("capacity"), st.integers(0, 40)),
    st.tuples(st.just("observed"), st.integers(0, 5), st.integers(0, 12)),
    st.tuples(st.just("policy"), st.integers(0, 5)),
), max_size=40)


def changes(policy: dict[str, Any]) -> dict[str, Any]:
    return {**policy, "decisions": "changes"}


def fold_both(policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> list[tuple[Any, Any]]:
    """Each input's outputs under the whole form and under the changes form, decoded, side by side."""
    whole, partial = Log(), Log()
    pairs = [(whole.policy(policy), partial.policy(changes(policy)))]
    names = [a["App"] for a in policy["apps"]]
    for event in log_events:
        name = names[event[1] % len(names)]
        if event[0] == "metric":
            pairs.append((whole.metric(name, event[2]), partial.metric(name, event[2])))
        elif event[0] == "capacity":
            e = {"type": "PoolCapacitySet", "capacity": event[1]}
            pairs.append((whole.event(e), partial.event(e)))
        elif event[0] == "observed":
            e = {"type": "InstancesObserved", "instances": {name: event[2]}}
            pairs.append((whole.event(e), partial.event(e)))
        elif len(policy["apps"]) > 1:  # a new version without one app
            policy = {**policy, "version": f"{policy['version']}+", "initial": {},
                      "apps": [a for a in policy["apps"] if a["App"] != name]}
            pairs.append((whole.policy(policy), partial.policy(changes(policy))))
    assert whole.desired == partial.desired  # the same `pool-instances` (Log keeps them as compaction would)
    return [([json.loads(o.value_bytes()) for o in a], [json.loads(o.value_bytes()) for o in b]) for a, b in pairs]


@given(policies(), events)
def test_a_decision_of_changes_is_the_whole_decision_less_what_did_not_change(
        policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    assert_forms_agree(policy, log_events)


@st.composite
def large_policies(draw: st.DrawFn) -> dict[str, Any]:
    """Pools of dozens of apps wanting a few instances at a time: a preemption's shares are below one unit, so
    the changes form takes its candidates from the ranks (`grants._by_rank`), not from a walk."""
    spec = [{"Metrical": [0, 30], "Number": -draw(st.integers(1, 3))}, {"Metrical": [30, 60], "Number": 0},
            {"Metrical": [60, 100], "Number": draw(st.integers(1, 4))}]
    apps = [{"App": f"App{i:02d}" if i % 7 == 0 else f"app{i:02d}", "Priority": draw(st.integers(1, 10)),
             "MinNum": draw(st.integers(0, 2)), "Spec": spec, "release": draw(st.sampled_from(["lazy", "eager"]))}
            for i in range(draw(st.integers(12, 60)))]
    initial = {a["App"]: a["MinNum"] + draw(st.integers(0, 4)) for a in apps}
    return {"kind": "decider", "version": "v1", "capacity": sum(initial.values()) + draw(st.integers(0, 4)),
            "initial": initial, "apps": apps}


large_events = st.lists(st.one_of(
    st.tuples(st.just("metric"), st.integers(0, 59), metricals),
    st.tuples(st.just("metric"), st.integers(0, 59), st.integers(0, 100).map(float)),
    st.tuples(st.just("observed"), st.integers(0, 59), st.integers(0, 6)),
), min_size=20, max_size=80)


@given(large_policies(), large_events)
def test_a_large_pools_decisions_of_changes_are_its_whole_decisions_less_what_did_not_change(
        policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    assert_forms_agree(policy, log_events)


def test_preemptions_among_many_candidates_agree_in_both_forms() -> None:
    """Hundreds of preemptions, most among dozens of candidates each giving one unit (the ranks' case), some
    among a few giving more (the walk's), decided alike in both forms."""
    rng = random.Random(49)
    policy = {"kind": "decider", "version": "v1", "capacity": 200 * 6,
              "apps": [app(f"app{i:03d}", 1 + i % 10, 1 + i % 3) for i in range(200)],
              "initial": {f"app{i:03d}": 6 for i in range(200)}}
    log_events = [("metric", rng.randrange(200), float(rng.randrange(101)) if rng.random() < 0.8 else
                   rng.uniform(0, 100)) for _ in range(1500)]
    decided = [w for pair in fold_both(policy, log_events) for w in pair[0] if w["type"] == "ScalingDecision"]
    units = [d for d in decided if d["scores"] and {m["count"] for m in d["moves"] if m["round"] == "preempt"} == {1}
             and len(d["scores"]) > 10]
    more = [d for d in decided if any(m["round"] == "preempt" and m["count"] > 1 for m in d["moves"])]
    assert len(units) > 100 and more, (len(units), len(more))
    assert_forms_agree(policy, log_events)


def assert_forms_agree(policy: dict[str, Any], log_events: list[tuple[Any, ...]]) -> None:
    before_instances: dict[str, int] = {}
    before_metricals: dict[str, float] = {}
    priority = {a["App"]: a["Priority"] for a in policy["apps"]}
    desired = whole_desired = Desired()
    for whole_out, partial_out in fold_both(policy, log_events):
        assert [o["type"] for o in whole_out] == [o["type"] for o in partial_out]
        for w, c in zip(whole_out, partial_out, strict=True):
            if w["type"] != "ScalingDecision":
                assert w == c
                continue
            assert "form" not in w and c["form"] == "changes"
            assert {k: w.get(k) for k in SAME} == {k: c.get(k) for k in SAME}
            assert c["reason"] == shortened(w["reason"])
            assert ScalingDecision.model_validate(c).model_dump(mode="json", by_alias=True, exclude_unset=True) == c
            trigger = w["trigger"].get("app")
            named = {trigger} if trigger in w["instances"] else set()
            left = {a for a in before_instances if a not in w["instances"] and before_instances[a]}
            moved = {a for a, n in w["instances"].items() if before_instances.get(a) != n}
            assert set(c["instances"]) == moved | left | named, (c["instances"], w["instances"], before_instances)
            assert all(c["instances"][a] == w["instances"].get(a, 0) for a in c["instances"])
            reset = {a for a, m in w["metricals"].items() if before_metricals.get(a) != m}
            assert set(c["metricals"]) == reset | named, (c["metricals"], w["metricals"], before_metricals)
            assert all(c["metricals"][a] == w["metricals"][a] for a in c["metricals"])
            gave = {m["from"] for m in w["moves"] if m["round"] == "preempt"}
            assert c["scores"] == {a: s for a, s in w["scores"].items() if a in gave}
            if w["scores"]:
                assert (c["scored"], c["score_sum"]) == (len(w["scores"]), score_sum(w, priority))
            else:
                assert "scored" not in c and "score_sum" not in c
            desired = desired.after(ScalingDecision.model_validate(c), 0)
            whole_desired = whole_desired.after(ScalingDecision.model_validate(w), 0)
            assert dict(desired.instances) == dict(whole_desired.instances)
            before_instances, before_metricals = dict(w["instances"]), dict(w["metricals"])


def test_the_seeds_worked_example_in_the_changes_form() -> None:
    """SPEC §2's acceptance scenario, decision by decision, as a pool that says `decisions: changes` records it."""
    log = Log()
    first = decision(log.policy(changes(seed_policy())))
    assert (first["instances"], first["metricals"], first["form"]) == ({"ats": 5, "hadoop": 5},
                                                                       {"ats": 50.0, "hadoop": 50.0}, "changes")
    steady = decision(log.metric("ats", 55))
    assert (steady["instances"], steady["metricals"]) == ({"ats": 5}, {"ats": 55.0})
    rejected = decision(log.metric("hadoop", 70))
    assert (rejected["outcome"], rejected["instances"], rejected["metricals"]) == ("rejected", {"hadoop": 5},
                                                                                 {"hadoop": 70.0})
    partial = decision(log.metric("ats", 75))  # hadoop gives 3 by preemption, the only candidate
    assert (partial["outcome"], partial["instances"]) == ("partial", {"ats": 8, "hadoop": 2})
    assert (partial["scores"], partial["scored"], partial["score_sum"]) == ({"hadoop": 50.0}, 1, 50.0)
    assert partial["metricals"] == {"ats": 75.0}
    decision(log.metric("ats", 30))
    donor = decision(log.metric("Hadoop", 90))  # ats gives 5 as an idle donor: its metrical reset to 50
    assert (donor["instances"], donor["metricals"]) == ({"ats": 3, "hadoop": 7}, {"ats": 50.0, "hadoop": 90.0})
    assert donor["free"] == 0 and donor["scores"] == {} and "scored" not in donor


def test_a_thousand_app_decision_is_about_as_large_as_a_ten_app_one() -> None:
    """What the form is for: a decision's size follows what it changed, not the pool."""
    def size(apps: int) -> int:
        policy = {"kind": "decider", "version": "v1", "capacity": apps * 12, "decisions": "changes",
                  "apps": [app(f"app{i:04d}", 1 + i % 10, 2, ) for i in range(apps)]}
        log = Log()
        log.policy(policy)
        log.metric("app0001", 95)  # preempts among hundreds of lower-priority apps
        [out] = log.metric("app0003", 70)
        return len(out.value_bytes())

    small, large = size(10), size(1000)
    assert large < 2 * small, (small, large)


def test_a_policy_that_names_the_whole_form_decides_as_one_that_names_none() -> None:
    whole, named = Log(), Log()
    a, b = decision(whole.policy(seed_policy())), decision(named.policy({**seed_policy(), "decisions": "whole"}))
    assert a == b and "form" not in a
    assert pools.PoolState is type(whole.state)
