"""Stabilization windows, observe-only pools, stale reports, cool-downs and move caps (issue 16), through
`pools.apply` as the worker folds them, with event times chosen by each test."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.decisions import ScalingDecision
from streams.core.pools import codec
from tests.core.pools.builders import Log, decisions

T0 = 1_764_000_000_000  # event time of the policy, ms
SPEC = [{"Metrical": [0, 40], "Number": -2}, {"Metrical": [40, 60], "Number": 0},
        {"Metrical": [60, 100], "Number": 2}]


def web(**extra: Any) -> dict[str, Any]:
    return {"App": "web", "Priority": 1, "MinNum": 1, "release": "eager", "Spec": SPEC, **extra}


def batch(**extra: Any) -> dict[str, Any]:
    return {"App": "batch", "Priority": 2, "MinNum": 1, "Spec": SPEC, **extra}


def policy(*apps: dict[str, Any], capacity: int = 20, **pool: Any) -> dict[str, Any]:
    return {"kind": "decider", "version": "v1", "capacity": capacity,
            "initial": {a["App"]: 5 for a in apps}, "apps": list(apps), **pool}


def started(p: dict[str, Any]) -> Log:
    log = Log()
    log.policy(p, at=T0)
    return log


def flap(log: Log, reports: int, every_s: float, app: str = "web") -> list[dict[str, Any]]:
    """`app` reports 70, 30, 70, ... every `every_s` seconds; every decision it causes."""
    out = []
    for i in range(reports):
        out += decisions(log.metric(app, 70 if i % 2 == 0 else 30, at=T0 + round((i + 1) * every_s * 1000)))
    return out


def moved(d: dict[str, Any]) -> int:
    return sum(m["count"] for m in d["moves"])


def test_flapping_load_moves_at_most_once_a_window_with_stabilization_and_every_report_without() -> None:
    plain = flap(started(policy(web())), 24, 5)
    assert all(moved(d) for d in plain) and len(plain) == 24  # a move per report: +2, -2, +2, ...

    window = 60
    stable = flap(started(policy(web(scale_up_stabilization_s=window, scale_down_stabilization_s=window))), 24, 5)
    times = [d["cause"]["timestamp"] for d in stable if moved(d)]
    assert times, "the first report (nothing before it in its window) still moves"
    for t in times:
        assert sum(t <= u < t + window * 1000 for u in times) == 1, times
    held = [d for d in stable if not moved(d)]
    assert held and {d["reason_code"] for d in held} == {"stabilized"}
    assert {d["stabilization"]["applied_number"] for d in held} == {0}
    assert all("within scale_" in d["reason"] for d in held)


def test_a_give_up_applies_the_smallest_of_the_window() -> None:
    spec = [{"Metrical": [0, 10], "Number": -4}, {"Metrical": [10, 40], "Number": -1},
            {"Metrical": [40, 100], "Number": 0}]
    log = started({**policy({**web(scale_down_stabilization_s=30), "Spec": spec}), "initial": {"web": 10}})
    first = decisions(log.metric("web", 5, at=T0 + 1000))[0]
    assert first["moves"] == [{"from": "web", "to": "free", "count": 4, "round": "release"}]  # 10 -> 6
    log.metric("web", 45, at=T0 + 2000)  # Number 0: resets nothing, but sits in the window
    held = decisions(log.metric("web", 5, at=T0 + 3000))[0]
    assert held["reason_code"] == "stabilized" and held["moves"] == []
    log.metric("web", 30, at=T0 + 40_000)  # -1, alone in its window: applies
    mixed = decisions(log.metric("web", 5, at=T0 + 41_000))[0]  # -4 and -1 in the window: -1 applies
    assert mixed["stabilization"]["raw_number"] == -4 and mixed["stabilization"]["applied_number"] == -1
    assert moved(mixed) == 1 and "stabilized to -1" in mixed["reason"]


def test_observe_only_computes_decisions_but_never_changes_instances() -> None:
    log = started(policy(web(), batch(), observe_only=True))
    out = flap(log, 10, 5) + decisions(log.metric("batch", 90, at=T0 + 60_000))
    assert all(d["mode"] == "observe" for d in out)
    assert any(moved(d) for d in out)  # what would have moved is written
    assert all(d["instances"] == {"web": 5, "batch": 5} for d in out)
    assert ScalingDecision.model_validate(out[0]).mode == "observe"
    observed = decisions(log.event({"type": "InstancesObserved", "instances": {"web": 7}}, at=T0 + 61_000))[0]
    assert observed["instances"]["web"] == 7  # the actuator's counts are the pool's truth, observed or not


@pytest.mark.parametrize("form", ["whole", "changes"])
def test_under_observe_only_apps_going_stale_together_each_decide_from_the_instances_as_they_stand(form: str) -> None:
    """Two apps stale at one tick: the second's decision starts from the instances the fold keeps (the first's
    moves were only written), and a `decisions: changes` pool's ranks follow (`Log` checks them)."""
    log = started(policy(web(stale_after_s=10, on_stale="idle"),
                         {**batch(stale_after_s=10, on_stale="idle"), "release": "eager"},
                         observe_only=True, decisions=form))
    out = decisions(log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 11_000}, at=T0 + 11_000))
    assert [d["trigger"]["app"] for d in out] == ["batch", "web"]
    assert [d["moves"] for d in out] == [[{"from": "batch", "to": "free", "count": 4, "round": "release"}],
                                         [{"from": "web", "to": "free", "count": 4, "round": "release"}]]
    assert all(d["free"] == 10 for d in out)  # capacity 20, both at 5: nothing was released in truth
    later = decisions(log.metric("web", 95, at=T0 + 12_000))
    assert later[0]["moves"][0]["round"] == "free" and later[0]["instances"]["web"] == 5


def test_a_stale_app_held_idle_or_at_its_fallback_is_handled_as_configured_and_says_so() -> None:
    held = started(policy(web(), batch(stale_after_s=30)))
    tick = {"type": "Tick", "pool": "pool-a", "now": T0 + 29_000}
    assert held.event(tick, at=T0 + 29_000) == []  # not yet stale: a tick alone writes nothing
    [d] = decisions(held.event({**tick, "now": T0 + 31_000}, at=T0 + 31_000))
    assert d["trigger"] == {"kind": "stale", "app": "batch", "metrical": None, "capacity": None}
    assert d["reason_code"] == "stale_metric" and "held at 5 instances" in d["reason"]
    assert d["stale"]["on_stale"] == "hold" and d["stale"]["silent_s"] == 31
    assert held.event({**tick, "now": T0 + 90_000}, at=T0 + 90_000) == []  # stale once, until it reports

    idle = started(policy(web(), batch(stale_after_s=30, on_stale="idle"), capacity=10))
    out = decisions(idle.metric("web", 90, at=T0 + 45_000))  # the report moves the clock: batch went stale first
    assert [d["trigger"]["kind"] for d in out] == ["stale", "metric"]
    assert out[0]["reason_code"] == "stale_metric" and "offers all above MinNum" in out[0]["reason"]
    assert out[1]["moves"] == [{"from": "batch", "to": "web", "count": 2, "round": "idle"}]

    fallback = started(policy(web(stale_after_s=10, on_stale={"fallback_metrical": 20}), batch()))
    [d] = decisions(fallback.metric("batch", 50, at=T0 + 12_000))[:1]
    assert d["trigger"]["app"] == "web" and d["stale"]["fallback_metrical"] == 20
    assert d["moves"] == [{"from": "web", "to": "free", "count": 2, "round": "release"}]
    assert "as if it reported 20" in d["reason"]
    back = decisions(fallback.metric("web", 50, at=T0 + 13_000))
    assert [x["trigger"]["kind"] for x in back] == ["metric"]  # reporting again ends it


def test_a_report_older_than_its_apps_last_is_dead_lettered_out_of_order() -> None:
    log = started(policy(web(stale_after_s=60)))
    early = decisions(log.metric("web", 50, at=T0 - 61_000))  # its first report may predate the policy record
    assert early[0]["outcome"] == "steady"
    assert log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 1}, at=T0 + 1) == []  # silent since T0 only
    log.metric("web", 50, at=T0 + 10_000)
    [late] = log.metric("web", 90, at=T0 + 5_000)
    assert late.stream == "dlq" and json.loads(late.value_bytes())["reason_code"] == "out_of_order"
    assert log.state.decider is not None and log.state.decider.instances["web"] == 5
    plain = started(policy(web()))  # without time options, arrival order decides, as before
    plain.metric("web", 50, at=T0 + 10_000)
    assert decisions(plain.metric("web", 90, at=T0 + 5_000))[0]["outcome"] == "scaled"


def test_a_preempted_app_is_spared_during_its_cooldown() -> None:
    apps = [{**web(), "release": "lazy"}, batch()]
    log = started(policy(*apps, capacity=10, preempted_cooldown_s=60))
    first = decisions(log.metric("web", 90, at=T0 + 1000))[0]
    assert first["moves"] == [{"from": "batch", "to": "web", "count": 2, "round": "preempt"}]
    cooling = decisions(log.metric("web", 90, at=T0 + 30_000))[0]
    assert cooling["outcome"] == "rejected" and "cooling down" in cooling["reason"]
    again = decisions(log.metric("web", 90, at=T0 + 62_000))[0]
    assert again["moves"] == [{"from": "batch", "to": "web", "count": 2, "round": "preempt"}]


def test_max_moves_per_decision_caps_growth_and_release() -> None:
    spec = [{"Metrical": [0, 50], "Number": -5}, {"Metrical": [50, 100], "Number": 6}]
    log = started(policy({**web(), "MinNum": 0, "Spec": spec}, max_moves_per_decision=3))
    grown = decisions(log.metric("web", 90))[0]
    assert grown["requested"] == grown["granted"] == 3 and "max_moves_per_decision 3" in grown["reason"]
    released = decisions(log.metric("web", 10))[0]
    assert moved(released) == 3


def test_a_policy_without_the_options_keeps_no_time_and_writes_the_same_fields() -> None:
    log = started(policy(web(), batch()))
    d = decisions(log.metric("web", 90))[0]
    assert not {"mode", "stabilization", "stale"} & set(d)
    assert log.state.decider is not None and log.state.decider.timing is None


def test_timing_survives_the_changelog() -> None:
    log = started(policy(web(scale_down_stabilization_s=30, stale_after_s=20), batch(stale_after_s=5),
                         preempted_cooldown_s=10))
    flap(log, 5, 3)
    state = log.state
    assert state.decider is not None and state.decider.timing is not None and state.decider.timing.stale
    assert codec.load(json.loads(json.dumps(codec.dump_state(state))), codec.dump_policies(state)) == state


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 20_000), st.booleans()), min_size=1, max_size=40),
       st.integers(1, 60))
def test_with_stabilization_no_app_changes_direction_twice_within_its_window(
        reports: list[tuple[int, int, bool]], window_s: int) -> None:
    """Each app's own moves (growing on its report, giving up on its report or as an idle donor) never go
    up, down and up again (or down, up, down) within its window; preemption is a higher priority's doing."""
    apps = [web(), batch()]  # web releases at once, batch offers (and gives as an idle donor)
    windowed = [{**a, "scale_up_stabilization_s": window_s, "scale_down_stabilization_s": window_s} for a in apps]
    log = started(policy(*windowed, capacity=12))
    at, turns = T0, {"web": [], "batch": []}  # type: dict[str, list[tuple[int, int]]]
    for metrical, gap, is_web in reports:
        at += gap
        for d in decisions(log.metric("web" if is_web else "batch", metrical, at=at)):
            for m in d["moves"]:
                if m["round"] != "preempt":
                    for app, sign in ((m["to"], 1), (m["from"], -1)):
                        if app in turns and (not turns[app] or turns[app][-1][1] != sign):
                            turns[app].append((at, sign))
    for changes in turns.values():
        for (t1, _), _, (t3, _) in zip(changes, changes[1:], changes[2:], strict=False):
            assert t3 - t1 >= window_s * 1000, changes


def test_a_tick_before_a_policy_or_under_an_untimed_one_is_taken_silently() -> None:
    log = Log()
    assert log.event({"type": "Tick", "pool": "pool-a", "now": T0}, at=T0) == []  # no `no_policy` dead letter
    log.policy(policy(web()), at=T0)
    assert log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 10**6}, at=T0 + 10**6) == []


def test_a_new_policy_version_hands_a_still_silent_app_to_its_own_on_stale() -> None:
    log = started(policy(web(), batch(stale_after_s=10)))
    [held] = decisions(log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 11_000}, at=T0 + 11_000))
    assert held["stale"]["on_stale"] == "hold"
    log.policy({**policy(web(), batch(stale_after_s=10, on_stale="idle")), "version": "v2"}, at=T0 + 12_000)
    [idle] = decisions(log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 13_000}, at=T0 + 13_000))
    assert idle["stale"]["on_stale"] == "idle" and idle["stale"]["silent_s"] == 13  # silent since the start


def test_a_steady_apps_window_keeps_one_entry_however_many_reports() -> None:
    log = started(policy(web(scale_down_stabilization_s=3600)))
    for i in range(50):
        log.metric("web", 50, at=T0 + i * 1000)
    log.metric("web", 30, at=T0 + 60_000)
    timing = log.state.decider.timing  # type: ignore[union-attr]
    assert timing is not None and timing.reports["web"] == ((T0 + 49_000, 0), (T0 + 60_000, -2))


def test_published_policies_name_the_options_only_where_set() -> None:
    from schemas.policy import DeciderPolicy, published

    plain = published(DeciderPolicy.model_validate(policy(web(), batch())))
    assert "observe_only" not in plain and all("on_stale" not in a for a in plain["apps"])
    assert DeciderPolicy.model_validate(plain) == DeciderPolicy.model_validate(policy(web(), batch()))
    timed = published(DeciderPolicy.model_validate(policy(web(stale_after_s=5), batch(), observe_only=True)))
    assert timed["observe_only"] is True and timed["apps"][0]["stale_after_s"] == 5
    assert "stale_after_s" not in timed["apps"][1]


timed_events = st.lists(st.one_of(
    st.tuples(st.just("metric"), st.sampled_from(["web", "batch"]), st.integers(0, 100), st.integers(0, 20_000)),
    st.tuples(st.just("tick"), st.just(""), st.just(0), st.integers(0, 60_000)),
    st.tuples(st.just("policy"), st.just(""), st.just(0), st.integers(0, 5_000)),
), max_size=30)


@given(timed_events, st.sampled_from(["hold", "idle", {"fallback_metrical": 75}]), st.integers(1, 40),
       st.sampled_from(["whole", "changes"]), st.booleans())
def test_timed_states_keep_idle_in_step_with_numbers_and_survive_the_changelog(
        events: list[tuple[str, str, int, int]], on_stale: Any, window_s: int, form: str, observing: bool) -> None:
    """Whatever reports, ticks and policy versions come, `idle` is the apps standing at a negative Number, and
    the changelog's dump loads back to the very same state (a worker recovering folds on exactly as before);
    under `decisions: changes` the ranks follow the Numbers stabilization and stale handling set (`Log`)."""
    apps = [web(scale_down_stabilization_s=window_s, stale_after_s=window_s, on_stale=on_stale),
            batch(scale_up_stabilization_s=window_s, stale_after_s=2 * window_s, on_stale=on_stale)]
    pool = {"preempted_cooldown_s": window_s, "decisions": form, "observe_only": observing}
    log = started(policy(*apps, capacity=12, **pool))
    at, version = T0, 1
    for kind, name, metrical, gap in events:
        at += gap
        if kind == "metric":
            log.metric(name, metrical, at=at)
        elif kind == "tick":
            log.event({"type": "Tick", "pool": "pool-a", "now": at}, at=at)
        else:
            version += 1
            log.policy({**policy(*apps, capacity=12, **pool), "version": f"v{version}"}, at=at)
        state = log.state
        d = state.decider
        assert d is not None and d.timing is not None
        assert d.idle_apps() == frozenset(k for k, n in d.timing.numbers.items() if n < 0)
        assert codec.load(json.loads(json.dumps(codec.dump_state(state))), codec.dump_policies(state)) == state
