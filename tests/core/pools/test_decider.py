"""The decider (SPEC §2): the seed's worked example exactly, the rounds, and eviction."""

from __future__ import annotations

import json

from streams.core import pools
from tests.core.pools.builders import Log, app, decision, seed_policy


def test_the_seeds_worked_example() -> None:
    log = Log()
    started = decision(log.policy(seed_policy()))
    assert started["outcome"] == "policy" and started["instances"] == {"ats": 5, "hadoop": 5}

    d = decision(log.metric("ats", 55))
    assert (d["outcome"], d["moves"], d["instances"]) == ("steady", [], {"ats": 5, "hadoop": 5})

    d = decision(log.metric("hadoop", 70))
    assert (d["outcome"], d["requested"], d["granted"], d["moves"]) == ("rejected", 5, 0, [])
    assert d["reason_code"] == "no_capacity"
    assert "ats (P1) is not idle" in d["reason"] and "no app has lower priority than hadoop" in d["reason"]

    d = decision(log.metric("ats", 75))
    assert (d["outcome"], d["requested"], d["granted"]) == ("partial", 5, 3)
    assert d["moves"] == [{"from": "hadoop", "to": "ats", "count": 3, "round": "preempt"}]
    assert d["instances"] == {"ats": 8, "hadoop": 2} and d["free"] == 0
    assert d["scores"] == {"hadoop": 50.0}  # 100 - 70 + 2 * 10

    d = decision(log.metric("ats", 30))
    assert (d["outcome"], d["moves"], d["instances"]) == ("idle", [], {"ats": 8, "hadoop": 2})
    assert d["reason_code"] == "idle_offered"

    d = decision(log.metric("Hadoop", 90))
    assert (d["outcome"], d["requested"], d["granted"]) == ("partial", 10, 5)
    assert d["trigger"] == {"kind": "metric", "app": "hadoop", "metrical": 90.0, "capacity": None}
    assert d["moves"] == [{"from": "ats", "to": "hadoop", "count": 5, "round": "idle"}]
    assert d["instances"] == {"ats": 3, "hadoop": 7}
    assert d["metricals"] == {"ats": 50.0, "hadoop": 90.0}  # the donor is reset to neutral
    assert [d["seq"] for d in [started]] == [1] and d["seq"] == 6


def test_free_capacity_is_taken_first() -> None:
    log = Log()
    log.policy({**seed_policy(), "capacity": 14})
    d = decision(log.metric("hadoop", 85))
    assert (d["outcome"], d["requested"], d["granted"]) == ("partial", 10, 4)
    assert d["moves"] == [{"from": "free", "to": "hadoop", "count": 4, "round": "free"}]
    assert d["free"] == 0 and d["instances"] == {"ats": 5, "hadoop": 9}


def test_preemption_splits_by_score_with_largest_remainder() -> None:
    log = Log()
    apps = [app("web", 1, 0), app("b", 5, 0), app("c", 5, 0), app("d", 7, 0)]
    log.policy({"kind": "decider", "version": "p", "capacity": 30, "initial": {"web": 0, "b": 10, "c": 10, "d": 10},
                "apps": apps})
    log.metric("b", 60)  # +5, nobody can give: rejected, but b's metrical is now 60
    d = decision(log.metric("web", 85))  # wants +10
    # scores: b 100-60+50 = 90, c 100-50+50 = 100, d 100-50+70 = 120; sum 310
    # shares 10*90/310 = 2.90, 10*100/310 = 3.23, 10*120/310 = 3.87 -> floors 2, 3, 3; leftover 2
    # to the largest fractions: b (.90), d (.87) -> b 3, c 3, d 4
    assert d["scores"] == {"b": 90.0, "c": 100.0, "d": 120.0}
    assert d["moves"] == [{"from": "b", "to": "web", "count": 3, "round": "preempt"},
                          {"from": "c", "to": "web", "count": 3, "round": "preempt"},
                          {"from": "d", "to": "web", "count": 4, "round": "preempt"}]
    assert d["outcome"] == "scaled"


def test_preemption_repeats_among_those_with_room_left() -> None:
    log = Log()
    apps = [app("web", 1, 0), app("b", 5, 4), app("c", 5, 0)]
    log.policy({"kind": "decider", "version": "p", "capacity": 15, "initial": {"web": 0, "b": 5, "c": 10},
                "apps": apps})
    d = decision(log.metric("web", 90))  # wants 10: b can give only 1, c gives the rest
    assert {m["from"]: m["count"] for m in d["moves"]} == {"b": 1, "c": 9}
    assert d["instances"] == {"b": 4, "c": 1, "web": 10}


def test_idle_donors_lowest_priority_first_then_larger_surplus() -> None:
    log = Log()
    apps = [app("web", 1, 0), app("x", 3, 0), app("y", 3, 0), app("z", 2, 0)]
    log.policy({"kind": "decider", "version": "p", "capacity": 24, "initial": {"web": 0, "x": 8, "y": 8, "z": 8},
                "apps": apps})
    log.metric("x", 30)  # offers 5
    log.metric("y", 10)  # offers 8
    log.metric("z", 10)  # offers 8, but higher priority than x and y
    d = decision(log.metric("web", 90))
    assert [(m["from"], m["count"], m["round"]) for m in d["moves"]] == [("y", 8, "idle"), ("x", 2, "idle")]
    assert d["metricals"]["y"] == 50.0 and d["metricals"]["x"] == 50.0 and d["metricals"]["z"] == 10.0


def test_eager_release_frees_at_once_and_max_num_caps_requests() -> None:
    log = Log()
    log.policy({"kind": "decider", "version": "p", "capacity": 10, "initial": {"ats": 6, "hadoop": 4},
                "apps": [app("ats", 1, 2, release="eager"), app("hadoop", 2, 2, MaxNum=5)]})
    d = decision(log.metric("ats", 25))
    assert d["moves"] == [{"from": "ats", "to": "free", "count": 4, "round": "release"}] and d["free"] == 4
    d = decision(log.metric("hadoop", 95))
    assert (d["requested"], d["granted"], d["instances"]["hadoop"]) == (1, 1, 5)
    d = decision(log.metric("hadoop", 95))
    assert (d["outcome"], d["reason_code"]) == ("rejected", "at_max_num")


def test_capacity_drop_evicts_lowest_priority_first_respecting_min_num() -> None:
    log = Log()
    log.policy(seed_policy())
    d = decision(log.event({"type": "PoolCapacitySet", "capacity": 6}))
    assert d["outcome"] == "evicted" and d["instances"] == {"ats": 4, "hadoop": 2}
    assert [(m["from"], m["count"]) for m in d["moves"]] == [("ats", 1), ("hadoop", 3)]
    d = decision(log.event({"type": "PoolCapacitySet", "capacity": 4}))
    assert d["instances"] == {"ats": 3, "hadoop": 1} and "MinNum could not be kept" in d["reason"]
    d = decision(log.event({"type": "PoolCapacitySet", "capacity": 12}))
    assert (d["outcome"], d["free"]) == ("resized", 8)


def test_observed_instances_replace_targets() -> None:
    log = Log()
    log.policy(seed_policy())
    d = decision(log.event({"type": "InstancesObserved", "instances": {"HADOOP": 3}}))
    assert d["outcome"] == "observed" and d["instances"] == {"ats": 5, "hadoop": 3} and d["free"] == 2


def test_a_new_policy_version_keeps_instances_and_takes_effect_after_it() -> None:
    log = Log()
    log.policy(seed_policy())
    log.metric("ats", 75)
    new = seed_policy() | {"version": "v4", "apps": [app("ats", 1, 3), app("hadoop", 2, 2), app("redis", 3, 1)]}
    new.pop("initial")
    new["capacity"] = 11
    d = decision(log.policy(new))
    assert d["policy_version"] == "v4" and d["instances"] == {"ats": 8, "hadoop": 2, "redis": 1}
    assert decision(log.metric("ats", 55))["policy_version"] == "v4"


def test_invalid_metric_records_go_to_the_dead_letter_stream() -> None:
    log = Log()
    [out] = log.metric("ats", 50)
    assert out.stream == "dlq" and json.loads(out.value_bytes())["reason_code"] == "no_policy"
    log.policy(seed_policy())
    [out] = log.metric("mysql", 50)
    assert json.loads(out.value_bytes())["reason_code"] == "unknown_app"
    [out] = log.feed(pools.POLICIES, b'{"kind": "decider", "version": "x", "apps": []}')
    assert json.loads(out.value_bytes())["reason_code"] == "bad_policy"
    [out] = log.event({"type": "PoolCapacitySet", "pool": "pool-b", "capacity": 3})
    assert json.loads(out.value_bytes())["reason_code"] == "pool_mismatch"
    assert [json.loads(o.value_bytes())["seq"] for o in log.metric("ats", 55)] == [2]
