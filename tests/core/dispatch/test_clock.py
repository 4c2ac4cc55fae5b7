"""A namespace's clock (SPEC §5): the latest timestamp of its records, commands as well as Ticks, so that a
namespace used again after an idle spell does not start its jobs on the last Tick's time (issue 35)."""

from __future__ import annotations

from streams.core.dispatch import DISPATCH_COMMANDS, job_uuid
from tests.core.dispatch.script import Script, assign, command, tick

T = 1_732_200_000_000


def _idle_namespace() -> Script:
    """Five jobs run and finish; the last Tick is at T + 1 s, then none come (nothing pending or running)."""
    s = Script()
    s.feed(assign("w1", T, T, 5, timeout_ms=60_000), at=T)
    for started in s.of("JobStarted"):
        s.feed(command("JobFinished", uuid=started["uuid"]), at=T + 500)
    s.feed(tick(T + 1_000))
    assert s.state.running == s.state.pending == 0 and s.state.now == T + 1_000
    return s


def test_a_job_assigned_after_an_idle_spell_starts_at_its_assigns_time_and_runs_its_whole_timeout() -> None:
    s = _idle_namespace()
    assigned_at = T + 44_000  # 43 s without a Tick
    s.feed(assign("w9", 0, 0, 1, timeout_ms=5_000), at=assigned_at)
    started = s.of("JobStarted")[-1]
    assert (started["worker"], started["started_at"], started["deadline"]) == ("w9", assigned_at, assigned_at + 5_000)
    assert started["cause"]["timestamp"] == assigned_at
    s.feed(tick(assigned_at + 41))  # the ticker's next tick: the job has 5 s, not -38 s
    s.feed(tick(assigned_at + 4_999))
    assert s.of("JobTimedOut") == [] and s.state.running == 1
    s.feed(tick(assigned_at + 5_000))
    [timed_out] = s.of("JobTimedOut")
    assert timed_out["at"] == assigned_at + 5_000


def test_a_future_start_waits_for_the_clock_and_a_command_moves_it() -> None:
    s = _idle_namespace()
    s.feed(assign("w9", T + 10_000, T + 10_000, 1), at=T + 2_000)
    assert s.of("JobStarted")[5:] == []  # its start has not come
    s.feed(command("MaxThreadsSet", max=10), at=T + 10_000)  # no Tick: the command's own time is the clock's
    assert [o["started_at"] for o in s.of("JobStarted")[5:]] == [T + 10_000]


def test_a_finish_dated_after_the_deadline_comes_after_the_timeout_that_the_missing_ticks_would_have_made() -> None:
    s = Script()
    s.feed(assign("w1", T, T, 1, timeout_ms=1_000, max_retries=0), at=T)
    [started] = s.of("JobStarted")
    s.feed(command("JobFinished", uuid=started["uuid"]), at=T + 1_500)
    assert [(o.stream, o.record["type"]) for o in s.outputs[-3:-1]] == [("job-outcomes", "JobTimedOut"),
                                                                         ("job-outcomes", "JobFailedFinally")]
    dead = s.outputs[-1]  # the finish found the attempt over: dead-lettered, with why
    assert dead.stream == "dlq" and dead.record.reason_code == "unknown_job"
    assert s.of("JobFinished") == [] and s.state.running == 0 and s.state.now == T + 1_500


def test_a_dead_lettered_commands_time_still_counts() -> None:
    s = Script()
    s.feed(assign("w1", T, T, 1, timeout_ms=1_000), at=T)
    s.feed(command("JobFinished", uuid="no-such-job"), at=T + 5_000)
    assert s.state.now == T + 5_000 and len(s.of("JobTimedOut")) == 1
    assert s.outputs[-1].stream == "dlq"
    s.feed(assign("w1", T, T, 1), at=T + 5_001)  # numbered on after the dead letter's record
    for stream in ("job-outcomes", "job-starts", "dlq"):
        assert s.seqs(stream) == list(range(1, len(s.seqs(stream)) + 1)), (stream, s.seqs(stream))
    assert len([o for o in s.outputs if o.stream == "job-outcomes"]) == 4  # accepted, timed out, failed; accepted


def test_an_unreadable_command_does_not_move_the_clock() -> None:
    s = Script()
    s.feed(assign("w1", T, T, 1, timeout_ms=1_000), at=T)
    s.feed(b"{not json", at=T + 5_000)
    assert s.state.now == T and s.of("JobTimedOut") == []


def test_a_tick_older_than_the_clock_changes_nothing_and_its_now_field_is_not_the_time() -> None:
    s = Script()
    s.feed(assign("w1", T, T, 1, timeout_ms=1_000), at=T + 3_000)
    before = s.state
    assert s.feed(tick(T + 9_999), at=T + 2_000) == []  # dated before the clock, whatever the ticker read
    assert (s.state.now, s.state.jobs, s.state.running) == (before.now, before.jobs, before.running)
    assert [o["type"] for o in s.feed(tick(T), at=T + 4_000) if o["type"] != "DispatcherHealth"] == [
        "JobTimedOut", "JobFailedFinally"]  # a ticker behind the broker still ticks: the broker's time counts


def test_the_first_uuid_is_made_from_the_assigns_coordinates_whatever_its_time() -> None:
    s = Script()
    accepted = s.feed(assign("w", 0, 0, 1), at=T)[0]
    assert accepted["uuids"] == [job_uuid(DISPATCH_COMMANDS, 0, 1, 0)]



def test_a_command_finds_what_came_due_before_it_started_as_a_tick_just_before_it_would_have() -> None:
    """Issue 46: with no Tick since a job came due, a cap lowered later does not keep it from having started, and
    a cancel later cancels it running; the same as with a Tick stamped just before each."""
    for ticked in (False, True):
        s = Script()
        s.feed(assign("w1", T + 2_000, T + 2_000, 1), at=T)
        if ticked:
            s.feed(tick(T + 3_000))
        s.feed(command("MaxThreadsSet", max=0), at=T + 3_000)
        assert [(o["started_at"], o["attempt"]) for o in s.of("JobStarted")] == [(T + 3_000, 1)], ticked
        assert s.state.running == 1 and s.state.max == 0

        s = Script()
        [uuid] = s.feed(assign("w1", T + 5_000, T + 5_000, 1), at=T)[0]["uuids"]
        if ticked:
            s.feed(tick(T + 6_000))
        s.feed(command("JobCancelled", uuid=uuid), at=T + 6_000)
        assert [o["started_at"] for o in s.of("JobStarted")] == [T + 6_000], ticked
        [cancelled] = s.of("JobCancelled")
        assert (cancelled["attempt"], cancelled["at"], s.state.running, s.state.pending) == (1, T + 6_000, 0, 0)
