"""A finish or failure names the attempt it ends (issue 39): a report that outlives its attempt's timeout is
refused as late, never applied to the retry that started meanwhile."""

from __future__ import annotations

from typing import Any

from tests.core.dispatch.script import Script, assign, command, tick


def late_finish_scenario(attempt: int | None) -> tuple[Script, list[dict[str, Any]], str]:
    """One job, one retry, a 1 s timeout: attempt 1 starts at 1,000 and times out at 2,000, when attempt 2
    starts; then attempt 1's finish arrives (at 2,500), naming `attempt`."""
    s = Script()
    s.feed(assign("w", 1_000, 1_000, 1, max_retries=1, timeout_ms=1_000), at=1_000)
    uuid = s.of("JobStarted")[0]["uuid"]
    s.feed(tick(2_000))
    assert [o["attempt"] for o in s.of("JobStarted")] == [1, 2]
    late = s.feed(command("JobFinished", uuid=uuid, **({} if attempt is None else {"attempt": attempt})), at=2_500)
    return s, late, uuid


def test_a_finish_that_names_an_attempt_which_timed_out_is_late_and_the_retry_runs_on() -> None:
    s, late, uuid = late_finish_scenario(1)
    assert [(o["type"], o.get("reason_code")) for o in late] == [("DeadLetter", "late_report")]
    assert "attempt 1" in late[0]["reason"] and "attempt 2 is running" in late[0]["reason"]
    job = s.state.jobs.get(uuid)
    assert job is not None and job.running and job.attempt == 2
    ended = s.feed(command("JobFinished", uuid=uuid, attempt=2), at=2_600)  # the retry's own finish ends it
    assert [(o["type"], o.get("attempt"), o.get("final")) for o in ended if o["type"] != "DispatcherHealth"] == [
        ("JobFinished", 2, True)]


def test_a_finish_without_an_attempt_ends_whichever_attempt_is_running() -> None:
    """Today's meaning, kept for reports that name none: the running attempt (here the retry) is ended."""
    s, late, uuid = late_finish_scenario(None)
    assert [(o["type"], o.get("attempt")) for o in late] == [("JobFinished", 2)]
    assert s.state.jobs.get(uuid) is None


def test_a_report_for_an_attempt_not_started_or_for_a_pending_job_is_refused_with_why() -> None:
    s, _, uuid = late_finish_scenario(1)
    assert [o["reason_code"] for o in s.feed(command("JobFailed", uuid=uuid, attempt=3), at=2_700)] == [
        "unknown_attempt"]
    failed = s.feed(command("JobFailed", uuid=uuid, attempt=2, error="no"), at=2_800)
    assert [o["type"] for o in failed if o["type"] != "DispatcherHealth"] == ["JobFailedFinally"]
