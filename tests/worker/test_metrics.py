"""The worker's counts as Prometheus reads them (the live page is checked in tests/worker/test_decider_e2e.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streams.core.outputs import DLQ, Emit
from streams.worker.metrics import NAMES, Collector, Histogram, Off, Tally

Samples = list[tuple[str, dict[str, str], float]]


def _scraped(tally: Tally, lag: dict[tuple[str, int], int], refetches: int) -> dict[str, Samples]:
    registry = CollectorRegistry()
    registry.register(Collector(tally, lambda: lag, lambda: refetches))
    text = generate_latest(registry).decode()
    return {f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_outcomes_reasons_latencies_and_lag_are_exported() -> None:
    tally = Tally()
    tally.folded("in", [Emit("scaling-decisions", "p", {"type": "ScalingDecision"})])
    tally.folded("in", [Emit(DLQ, "p", {"type": "DeadLetter", "reason_code": "bad_json"})])
    tally.folded("in", [])  # a record that changed nothing still counts as folded
    tally.records[("in", "forwarded")] += 1
    tally.fold.observe(0.0003)
    tally.commit.observe(0.02)
    scraped = _scraped(tally, {("in", 3): 12}, refetches=2)

    assert ("tribunal_records_total", {"topic": "in", "outcome": "folded"}, 2.0) in scraped["tribunal_records"]
    assert ("tribunal_records_total", {"topic": "in", "outcome": "dead_lettered"}, 1.0) in scraped["tribunal_records"]
    assert ("tribunal_records_total", {"topic": "in", "outcome": "forwarded"}, 1.0) in scraped["tribunal_records"]
    assert scraped["tribunal_dead_letters"] == [("tribunal_dead_letters_total",
                                                 {"topic": "in", "reason": "bad_json"}, 1.0)]
    assert ("tribunal_fold_seconds_bucket", {"le": "0.00025"}, 0.0) in scraped["tribunal_fold_seconds"]
    assert ("tribunal_fold_seconds_bucket", {"le": "0.0005"}, 1.0) in scraped["tribunal_fold_seconds"]
    assert ("tribunal_commit_seconds_count", {}, 1.0) in scraped["tribunal_commit_seconds"]
    assert scraped["tribunal_consumer_lag"] == [("tribunal_consumer_lag", {"topic": "in", "partition": "3"}, 12.0)]
    assert scraped["tribunal_refetches"] == [("tribunal_refetches_total", {}, 2.0)]
    exported = {sample for samples in scraped.values() for sample, _, _ in samples}
    assert {n for n in NAMES if n.endswith("_total") or n in ("tribunal_consumer_lag", "tribunal_restarts_in_place")} \
        <= exported


def test_a_histogram_is_cumulative_with_an_infinite_bucket() -> None:
    h = Histogram((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 7.0):
        h.observe(seconds)
    assert h.cumulative() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)] and h.sum == 7.65


def test_with_metrics_off_nothing_is_counted() -> None:
    off = Off()
    off.folded("in", [Emit(DLQ, "p", {"type": "DeadLetter", "reason_code": "bad_json"})])
    off.forwarded("in")
    off.fold.observe(0.1)
    assert not off.records and not off.dead and sum(off.fold.counts) == 0


DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "tribunal-dashboard.json"
PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "max", "min", "le", "topic", "partition",
                "reason", "outcome", "instance", "job", "key", "m", "s"}


def test_every_dashboard_expression_names_exported_metrics() -> None:
    import types

    from prometheus_client import ProcessCollector

    from streams.core import folds
    from streams.core.groups import GroupState

    tally = Tally()  # one of everything, so that every family has its samples
    tally.folded("in", [Emit(DLQ, "p", {"type": "DeadLetter", "reason_code": "bad_json"})])
    pools = types.SimpleNamespace(name="pools", gauges=lambda state: {"tribunal_pool_free_instances": 1.0})
    held = [(folds.GROUPS, "g", GroupState()), (pools, "p", None)]
    registry = CollectorRegistry()
    registry.register(Collector(tally, lambda: {("in", 0): 1}, lambda: 0, lambda: held))
    ProcessCollector(registry=registry)
    exported = {s.name for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
    exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for t in panel["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        bare = re.sub(r'"[^"]*"', "", expr)  # label values
        names = {w for w in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", bare) if w not in PROMQL_WORDS}
        assert names and names <= exported, (expr, names - exported)


def test_each_held_keys_gauges_are_exported_under_their_own_names() -> None:
    import types

    fold = types.SimpleNamespace(name="groups", gauges=lambda state: {"tribunal_group_jobs": float(state)})
    registry = CollectorRegistry()
    registry.register(Collector(Tally(), dict, lambda: 0, lambda: [(fold, "g1", 3), (fold, "g2", 0)]))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert [(s.labels, s.value) for s in families["tribunal_group_jobs"].samples] == [({"key": "g1"}, 3.0),
                                                                                     ({"key": "g2"}, 0.0)]
