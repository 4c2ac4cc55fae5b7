"""The audit page of a dispatcher namespace, from a log decided by the pure core (no broker needed)."""

from __future__ import annotations

from streams.audit.explain import explanations
from streams.audit.report import render_page
from streams.core.dispatch.view import summary
from streams.settings import Settings
from tests.audit.test_jobs import logged, uuid_of
from tests.core.dispatch.script import NS, assign, command, tick


def test_a_namespace_page_plots_running_against_caps_per_worker_and_lateness() -> None:
    log = logged([command("MaxThreadsSet", max=2), command("WorkerMaxSet", worker="w2", max=1),
                  assign("w1", 0, 300, 3), assign("w2", 0, 0, 2), tick(100), command("JobFinished", uuid=uuid_of(3)),
                  tick(400)])
    found = list(explanations(log, Settings(), lambda r: True, describe=summary, only=("dispatch", NS)))
    assert len(found) == 7 and all("jobs" not in f["after"] for f in found)  # states without the jobs listing
    page = render_page("namespace", NS, found, "from the beginning to the end")
    assert page.count("<figure class='plot'>") == 3
    assert "Running per worker against its cap (2 of 2 workers, the busiest)" in page
    starts = sum(len(f["starts"]) for f in found)
    assert starts == 3 and f"Lateness of {starts} starts" in page
    assert "<td>WorkerMaxSet</td>" in page and "<td>2 / 2</td>" in page and "JobFinished 1, JobStarted 1" in page
