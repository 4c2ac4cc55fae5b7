"""Audit pages of a dispatcher namespace and a shard job set, from logs decided by the pure core (no broker needed)."""

from __future__ import annotations

import json

from streams.audit.explain import explanations
from streams.audit.plots import duration_unit
from streams.audit.report import render_page
from streams.audit.report.shards import bands
from streams.core import shards
from streams.core.dispatch.view import summary
from streams.core.source import SourceRecord
from streams.settings import Settings
from tests.audit.test_jobs import decided, logged, uuid_of
from tests.core.dispatch.script import NS, assign, command, tick


def test_a_namespace_page_plots_running_against_caps_per_worker_and_lateness() -> None:
    log = logged([command("MaxThreadsSet", max=2, principal="ops"), command("WorkerMaxSet", worker="w2", max=1),
                  assign("w1", 0, 300, 3), assign("w2", 0, 0, 2), tick(100),
                  command("JobFinished", uuid=uuid_of(3), principal="tenant-w2"), tick(400)])
    found = list(explanations(log, Settings(), lambda r: True, describe=summary, only=("dispatch", NS)))
    assert len(found) == 7 and all("jobs" not in f["after"] for f in found)  # states without the jobs listing
    page = render_page("namespace", NS, found, "from the beginning to the end")
    assert page.count("<figure class='plot'>") == 3
    assert "Running per worker against its cap (2 of 2 workers, the busiest)" in page
    starts = sum(len(f["starts"]) for f in found)
    assert starts == 3 and f"Lateness of {starts} starts" in page
    assert "<td>WorkerMaxSet</td>" in page and "<td>2 / 2</td>" in page and "JobFinished 1, JobStarted 1" in page
    assert "<th>sent by</th>" in page  # who sent each command, where the record names its sender
    assert "<td>MaxThreadsSet</td><td>ops</td>" in page and "<td>JobFinished</td><td>tenant-w2</td>" in page
    assert "<td>WorkerMaxSet</td><td>-</td>" in page


def test_lateness_is_plotted_in_a_unit_its_spread_reads_in_and_the_table_dates_the_clock() -> None:
    assert duration_unit([0, 250, 1_900]) == (1, "ms")
    assert duration_unit([-3_000, 500]) == (1_000, "s")
    assert duration_unit([0, 3 * 86_400_000 + 17]) == (86_400_000, "days")  # one job late by days
    day = 86_400_000
    log = logged([assign("w1", 0, 0, 1), tick(3 * day), assign("w2", 0, 0, 1)])
    found = list(explanations(log, Settings(), lambda r: True, describe=summary, only=("dispatch", NS)))
    page = render_page("namespace", NS, found, "from the beginning to the end")
    assert "started minus acceptable start (days; &lt; 0: early)" in page or \
        "started minus acceptable start (days; < 0: early)" in page
    assert "<td>1970-01-04 00:00:00.000</td>" in page and "<td>-</td>" in page  # the clock as a time, or none yet


def test_the_last_epoch_of_a_job_set_is_drawn_past_the_last_record() -> None:
    """A node lost by the span's last record: the plan that follows is what the job set ends with, and is drawn."""
    values = [{"type": "TaskCountSet", "job_set": "js", "tasks": 10},
              {"type": "NodeJoined", "job_set": "js", "node": "n1", "address": "a:1", "incarnation": 1},
              {"type": "NodeJoined", "job_set": "js", "node": "n2", "address": "b:1", "incarnation": 2},
              {"type": "NodeLost", "job_set": "js", "node": "n2", "incarnation": 2}]
    inputs = [SourceRecord(shards.SHARD_EVENTS, 0, i, 1_000 * (i + 1), b"js", json.dumps(v).encode())
              for i, v in enumerate(values)]
    found = list(explanations(decided(inputs, list(shards.INPUTS)), Settings(), lambda r: True,
                              only=("shards", "js")))
    epochs = [f for f in found if f.get("plan", {}).get("new_epoch")]
    for x in ("time", "order"):
        drawn = bands(found, epochs, x)
        last = [b for b in drawn if b[0] == max(b[0] for b in drawn)]
        assert [(node, lo, hi) for _, _, node, lo, hi in last] == [("n1", 1, 10)]
        [(start, stop, *_)] = last
        whole = max(b[1] for b in drawn) - min(b[0] for b in drawn)
        assert (stop - start) / whole >= 1 / 21, (x, last)  # a visible part of the plot, not a millisecond
    assert "Task ranges per node" in render_page("job_set", "js", found, "all")
