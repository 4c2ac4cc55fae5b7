"""What `explain` shows of a decision: the window and the stale handling that shaped it."""

from __future__ import annotations

import json

from streams.core.pools import view
from tests.core.pools.test_timing import T0, batch, policy, started, web


def explained(log_step: list, before: object) -> list[str]:  # type: ignore[type-arg]
    outputs = [json.loads(out.value_bytes()) for out in log_step]
    found = {**view.explain(before, outputs), "before": {}, "after": {}}  # type: ignore[arg-type]
    return view.render(found)


def test_explain_names_the_window_and_its_reports() -> None:
    log = started(policy(web(scale_up_stabilization_s=60, scale_down_stabilization_s=60)))
    log.metric("web", 70, at=T0 + 1000)
    before = log.state
    lines = explained(log.metric("web", 30, at=T0 + 2000), before)
    window = [line for line in lines if line.startswith("window")]
    assert window == [f"window  scale_down_stabilization_s 60: Number -2 -> +0; the window's reports (event time "
                      f"ms): +2 at {T0 + 1000}, -2 at {T0 + 2000}"], lines
    assert lines[-1].startswith("reason  stabilized: ")


def test_explain_names_the_stale_app_and_how_it_was_handled() -> None:
    log = started(policy(web(), batch(stale_after_s=30, on_stale={"fallback_metrical": 80}), observe_only=True))
    before = log.state
    lines = explained(log.event({"type": "Tick", "pool": "pool-a", "now": T0 + 40_000}, at=T0 + 40_000), before)
    assert "stale   batch: no report for 40 s, stale_after_s 30: handled as if it reported 80" in lines, lines
    assert any(line.startswith("mode    observe-only") for line in lines)


def test_explain_shows_every_decision_of_a_record_the_stale_ones_first() -> None:
    log = started(policy(web(), batch(stale_after_s=30)))
    before = log.state
    outputs = [json.loads(out.value_bytes()) for out in log.metric("web", 90, at=T0 + 31_000)]
    found = view.explain(before, outputs)  # type: ignore[arg-type]
    assert [d["trigger"]["kind"] for d in found["stale_decisions"]] == ["stale"]
    assert found["decision"]["trigger"]["kind"] == "metric"
    lines = view.render({**found, "before": {}, "after": {}})
    assert lines[0] == "decision seq 2, policy v1: batch went stale" and any("web reports 90" in x for x in lines)
