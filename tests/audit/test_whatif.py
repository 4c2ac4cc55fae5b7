"""What-if: a pool's log replayed under a candidate policy, against a direct replay of the edited log."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from schemas.policy import DeciderPolicy
from streams.audit.kafka_log import Bound, within
from streams.audit.plots import label_x, pyplot
from streams.audit.whatif import compare, substance
from streams.clients import envelope
from streams.core.source import SourceRecord
from streams.lines import export_row
from streams.replay.replayer import Replayer
from tests.core.pools.builders import app
from tests.helpers import tribunal

T0 = 1_764_000_000_000
APPS = ["ats", "hadoop", "redis", "spark"]


def in_force(version: str = "v1", **changes: Any) -> dict[str, Any]:
    apps = [app("ats", 1, 2), app("hadoop", 2, 2), app("redis", 3, 1), app("spark", 5, 0)]
    return {"kind": "decider", "version": version, "capacity": 24,
            "initial": {"ats": 5, "hadoop": 5, "redis": 4, "spark": 4}, "apps": apps, **changes}


def crash_like_log(seed: int, records: int = 1500) -> list[SourceRecord]:
    """Three pools' policies, then their load reports, as the crash test produces them (one partition per
    topic, a second apart at most)."""
    rng = random.Random(seed)
    log = [SourceRecord("policies", 0, i, T0 + i, f"pool-{i}".encode(), json.dumps(in_force()).encode())
           for i in range(3)]
    at = T0 + 10
    for offset in range(records):
        at += rng.randrange(1, 1000)
        log.append(SourceRecord("plugin_decider", 0, offset, at, f"pool-{rng.randrange(3)}".encode(),
                                envelope(rng.choice(APPS), rng.randrange(101), "plugin_decider")))
    return log


def candidate(version: str = "candidate", **changes: Any) -> DeciderPolicy:
    return DeciderPolicy.model_validate(in_force(version, **changes))


def direct_differences(log: list[SourceRecord], pool: str, policy: DeciderPolicy) -> list[tuple[str, int, int]]:
    """The inputs whose decisions differ, by replaying the log as recorded and with the pool's policy records
    replaced by `policy`: the check what-if must agree with."""
    edited = [r._replace(value=policy.model_dump_json().encode()) if r.topic == "policies" and r.key == pool.encode()
              else r for r in log]
    runs = []
    for records in (log, edited):
        replayer = Replayer()
        runs.append({(r.topic, r.partition, r.offset): [substance(json.loads(o.value)) for o in replayer.feed(r)
                                                        if o.topic == "scaling-decisions"]
                     for r in records if r.key == pool.encode()})
    return sorted(k for k in runs[0] if runs[0][k] != runs[1][k])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_policy_in_force_differs_nowhere(seed: int) -> None:
    log = crash_like_log(seed)
    same = compare(log, "pool-1", candidate(version="v1"))
    assert same.differences == [] and len(same.inputs) > 400
    summary = same.summary()
    assert summary["in_force"] == summary["under_candidate"] and summary["differ"] == 0
    later = compare(log, "pool-1", candidate(version="v1"), in_range=within(Bound(time_ms=T0 + 200_000), None))
    assert later.differences == [] and later.under_candidate.adopted is None  # nothing to adopt: it is in force


@pytest.mark.parametrize("changes", [
    {"capacity": 18},
    {"max_moves_per_decision": 2},
    {"preempted_cooldown_s": 30},
    {"apps": [app("ats", 1, 2, scale_down_stabilization_s=20, scale_up_stabilization_s=5), app("hadoop", 2, 2),
              app("redis", 3, 1, stale_after_s=60, on_stale="idle"), app("spark", 5, 0)]},
])
def test_a_changed_policy_differs_exactly_where_a_direct_replay_does(changes: dict[str, Any]) -> None:
    log = crash_like_log(7)
    policy = candidate(**changes)
    found = compare(log, "pool-2", policy)
    expected = direct_differences(log, "pool-2", policy)
    assert expected, "the change must matter on this log"
    assert sorted((d.record.topic, d.record.partition, d.record.offset) for d in found.differences) == expected


def test_figures_count_instance_hours_preemptions_refusals_and_flaps() -> None:
    hour = 3_600_000
    policy = {"kind": "decider", "version": "v1", "capacity": 10, "initial": {"ats": 5, "hadoop": 5},
              "apps": [app("ats", 1, 3, release="eager"), app("hadoop", 2, 2)]}
    log = [SourceRecord("policies", 0, 0, T0, b"pool-a", json.dumps(policy).encode())]
    reports = [(T0 + hour, "ats", 70), (T0 + hour + 10_000, "ats", 10), (T0 + hour + 20_000, "hadoop", 90)]
    log += [SourceRecord("plugin_decider", 0, i, at, b"pool-a", envelope(name, m, "plugin_decider"))
            for i, (at, name, m) in enumerate(reports)]
    found = compare(log, "pool-a", DeciderPolicy.model_validate(policy), end=T0 + 2 * hour)
    run = found.in_force
    # ats: 5 for an hour, 8 for 10 s (preempted 3 from hadoop), 3 after releasing 5 (eager), to the end
    assert run.instance_hours(found.end)["ats"] == pytest.approx(5 + 8 * 10 / 3600 + 3 * (hour - 10_000) / hour)
    assert run.preemptions() == 3
    assert run.refusals() == 2 and run.refused() == 2 + 5  # ats got 3 of +5; hadoop 5 of +10 (the free 5)
    assert run.flaps() == {"ats": 1, "hadoop": 1}  # ats grew and shrank within a minute; hadoop shrank then grew


def test_the_what_if_command_reads_an_export_and_writes_a_page_without_a_broker(tmp_path: Path) -> None:
    log = crash_like_log(5, 300)
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(export_row(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
                              + "\n" for r in log))
    policy = tmp_path / "candidate.json"
    policy.write_text(json.dumps(in_force("tight", capacity=18, observe_only=True)))
    page = tmp_path / "what-if.html"
    shown = tribunal("audit", "what-if", "--pool", "pool-0", "--policy", str(policy), "--input", str(export),
                     "--html", str(page), "--json", "--bootstrap", "127.0.0.1:9")  # never dialled
    summary = json.loads(shown.stdout)
    assert summary["candidate"] == "tight" and summary["differ"] == len(summary["differences"]) > 0
    assert summary["adopted"] is None  # from the beginning: the candidate stands in the pool's policy record
    text = page.read_text()
    assert text.count("<figure class='plot'>") == 1 and "in force (solid) and candidate (dashed)" in text
    rows = sum(text.count(f"<tr><td>{topic}[0]@") for topic in ("policies", "plugin_decider"))
    assert rows == summary["differ"]  # the pool's policy record too: it started the pool at a smaller capacity
    ordered = tribunal("audit", "what-if", "--pool", "pool-0", "--policy", str(policy), "--input", str(export),
                       "--x", "order", "--show", "2", "--bootstrap", "127.0.0.1:9")
    assert "decisions that differ" in ordered.stdout and "more (--html or --json lists them all)" in ordered.stdout


def test_plots_label_time_as_time_of_day_or_by_input_order() -> None:
    from datetime import UTC, datetime

    from matplotlib.dates import date2num

    plt = pyplot()
    _, ax = plt.subplots()
    burst = datetime(2026, 11, 24, 14, 2, 0, 200_000, tzinfo=UTC)
    label_x([ax], "time")
    assert ax.xaxis.get_major_formatter()(date2num(burst)) == "14:02:00"  # not 02:00.200000
    assert ax.get_xlabel() == "time of day (UTC)"
    _, ax = plt.subplots()
    label_x([ax], "order")
    assert ax.get_xlabel().startswith("order (1, 2, ...")
    plt.close("all")


def test_the_clock_of_a_what_if_never_runs_back() -> None:
    """Applied order is not event-time order across topics: an event stamped before the report applied ahead
    of it must not count negative time."""
    policy = in_force()
    log = [SourceRecord("policies", 0, 0, T0, b"pool-a", json.dumps(policy).encode()),
           SourceRecord("plugin_decider", 0, 0, T0 + 3_600_000, b"pool-a", envelope("ats", 90, "plugin_decider")),
           SourceRecord("cluster-events", 0, 0, T0 + 1_800_000, b"pool-a",
                        json.dumps({"type": "PoolCapacitySet", "capacity": 30}).encode())]
    run = compare(log, "pool-a", DeciderPolicy.model_validate(policy)).in_force
    assert run.times == [T0, T0 + 3_600_000, T0 + 3_600_000]
    assert run.instance_hours(T0 + 3_600_000) == {"ats": 5.0, "hadoop": 5.0, "redis": 4.0, "spark": 4.0}


@pytest.mark.parametrize(("recorded", "candidate_form"), [("changes", None), (None, "changes")])
def test_the_form_of_decision_alone_is_no_difference(recorded: str | None, candidate_form: str | None) -> None:
    """Issue 49: a pool under `decisions: changes` against the same policy stating whole decisions (or the
    reverse) decides the same: what-if compares what was decided, not how much of the pool a record restates."""
    form = {} if recorded is None else {"decisions": recorded}
    log = [r._replace(value=json.dumps(in_force(**form)).encode()) if r.topic == "policies" else r
           for r in crash_like_log(5, 300)]
    other = candidate(**({} if candidate_form is None else {"decisions": candidate_form}))
    assert compare(log, "pool-0", other).differences == []
    assert compare(log, "pool-0", candidate(capacity=20)).differences  # and a real change still shows
