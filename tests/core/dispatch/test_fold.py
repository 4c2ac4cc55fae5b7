"""The dispatcher's rules (SPEC §5, seed 002), one at a time."""

from __future__ import annotations

import pytest

from streams.core import dispatch
from streams.core.dispatch import acceptable_starts, buckets, dump, load
from tests.core.dispatch.script import NS, Script, assign, command, tick


@pytest.mark.parametrize(("n", "expected"), [(1, [100]), (2, [100, 200]), (5, [100, 125, 150, 175, 200])])
def test_a_batch_spreads_its_acceptable_starts_evenly_over_start_to_end(n: int, expected: list[int]) -> None:
    assert acceptable_starts(100, 200, n) == expected
    s = Script()
    s.feed(assign("w", 100, 200, n))
    assert sorted(j.acceptable_start for j in s.state.jobs.values()) == expected
    assert {j.expected_start for j in s.state.jobs.values()} == {100}


def test_uuids_are_made_from_the_assigns_coordinates() -> None:
    a, b = Script(), Script()
    accepted = a.feed(assign("w", 0, 0, 3))[0]
    assert accepted["type"] == "JobsAccepted" and len(set(accepted["uuids"])) == 3
    assert b.feed(assign("w", 0, 0, 3))[0]["uuids"] == accepted["uuids"]
    assert accepted["uuids"][0] == dispatch.job_uuid(dispatch.DISPATCH_COMMANDS, 0, 1, 0)


def test_nothing_starts_before_its_expected_start() -> None:
    s = Script()
    s.feed(assign("w", 1_000, 2_000, 2))
    s.feed(tick(999))
    assert s.of("JobStarted") == []
    s.feed(tick(1_000))
    assert [o["external_id"] for o in s.of("JobStarted")] == ["w-0", "w-1"]


def test_the_worker_cap_admits_up_to_its_max_not_the_seeds_typo() -> None:
    s = Script()
    s.feed(command("WorkerMaxSet", worker="w", max=2))
    s.feed(assign("w", 0, 0, 3))
    assert [o["external_id"] for o in s.of("JobStarted")] == ["w-0", "w-1"]  # the seed's `>` would start none
    assert s.state.worker("w").running == 2 and s.state.worker("w").pending == 1


def test_the_earlier_acceptable_start_goes_first_under_both_caps() -> None:
    s = Script()
    s.feed(command("MaxThreadsSet", max=2))
    s.feed(command("WorkerMaxSet", worker="a", max=1))
    s.feed(assign("a", 100, 400, 4))  # acceptable 100, 200, 300, 400
    s.feed(assign("b", 100, 250, 4))  # acceptable 100, 150, 200, 250
    s.feed(tick(100))
    # a-0 (100, assigned first) and b-0 (100); a has no room after a-0, so b's go next as slots free up
    assert [o["external_id"] for o in s.of("JobStarted")] == ["a-0", "b-0"]
    started = {o["external_id"]: o["uuid"] for o in s.of("JobStarted")}
    s.feed(command("JobFinished", uuid=started["a-0"]))
    assert s.of("JobStarted")[-1]["external_id"] == "b-1"  # 150 before a-1's 200, though a has room again
    s.feed(command("JobFinished", uuid=started["b-0"]))
    assert s.of("JobStarted")[-1]["external_id"] == "a-1"  # 200 ties with b-2: a-1 was assigned first
    assert s.state.running == 2


def test_ties_on_acceptable_start_go_by_assignment_order() -> None:
    s = Script()
    s.feed(command("MaxThreadsSet", max=1))
    s.feed(assign("b", 500, 500, 1))
    s.feed(assign("a", 500, 500, 1))
    s.feed(tick(500))
    assert [o["worker"] for o in s.of("JobStarted")] == ["b"]


def test_a_timeout_is_retried_in_its_place_and_then_fails_for_good() -> None:
    s = Script()
    s.feed(assign("w", 0, 0, 1, max_retries=1, timeout_ms=100))
    s.feed(tick(50))
    s.feed(tick(100))  # deadline 0 + 100 reached
    outcomes = [o["type"] for o in s.of("JobTimedOut") + s.of("JobRetryScheduled")]
    assert outcomes == ["JobTimedOut", "JobRetryScheduled"]
    assert [o["attempt"] for o in s.of("JobStarted")] == [1, 2]  # retried at once: it keeps its place
    s.feed(tick(200))
    final = s.of("JobFailedFinally")
    assert len(final) == 1 and final[0]["attempt"] == 2 and final[0]["final"] is True
    assert len(s.state.jobs) == 0 and s.state.running == 0


def test_a_finish_before_the_timeout_ends_the_job() -> None:
    s = Script()
    uuid = s.feed(assign("w", 0, 0, 1, timeout_ms=100))[0]["uuids"][0]
    s.feed(tick(10))
    s.feed(command("JobFinished", uuid=uuid))
    s.feed(tick(500))
    assert s.of("JobTimedOut") == [] and len(s.of("JobFinished")) == 1
    assert s.state.running == 0 and uuid not in s.state.jobs


def test_finished_attempts_do_not_pile_up_in_the_deadlines_queue() -> None:
    """An hour's timeout and jobs that finish in a moment: the ended attempts' deadline entries are
    dropped as they accumulate, not kept for the hour (the queue stays about the size of what runs)."""
    s = Script()
    s.feed(command("MaxThreadsSet", max=2))
    s.feed(assign("w", 0, 0, 500, timeout_ms=3_600_000))
    s.feed(tick(10))
    for _ in range(498):
        s.feed(command("JobFinished", uuid=s.of("JobStarted")[-1]["uuid"]))
    assert len(s.of("JobStarted")) == 500 and s.state.running == 2
    assert s.state.deadline_entries <= 2 * 2 + dispatch.rules.STALE_DEADLINES
    s.feed(tick(3_600_011))  # the two still running time out: their entries were kept
    assert len(s.of("JobTimedOut")) == 2


def test_a_reported_failure_retries_then_fails_with_the_error() -> None:
    s = Script()
    uuid = s.feed(assign("w", 0, 0, 1, max_retries=1))[0]["uuids"][0]
    s.feed(command("JobFailed", uuid=uuid, error="disk full"))
    s.feed(command("JobFailed", uuid=uuid, error="disk full again"))
    assert [o["error"] for o in s.of("JobRetryScheduled")] == ["disk full"]
    assert [o["error"] for o in s.of("JobFailedFinally")] == ["disk full again"]


def test_cancel_withdraws_a_pending_job_and_frees_a_running_ones_slot() -> None:
    s = Script()
    s.feed(command("MaxThreadsSet", max=1))
    uuids = s.feed(assign("w", 0, 0, 2))[0]["uuids"]
    s.feed(command("JobCancelled", uuid=uuids[1]))  # pending
    s.feed(command("JobCancelled", uuid=uuids[0]))  # running
    assert [o["attempt"] for o in s.of("JobCancelled")] == [0, 1]
    assert len(s.of("JobStarted")) == 1 and s.state.running == 0 and len(s.state.jobs) == 0


def test_an_old_or_repeated_tick_changes_nothing() -> None:
    s = Script()
    s.feed(tick(1_000))
    before = s.state
    assert s.feed(tick(1_000)) == [] and s.feed(tick(10)) == []
    assert s.state.now == before.now and s.state.seqs == before.seqs


@pytest.mark.parametrize(("value", "reason"), [
    (command("JobFinished", uuid="nope"), "unknown_job"),
    (command("MaxThreadsSet", max=-1), "bad_command"),
    (command("WorkerMaxSet", worker="w", max=-3), "bad_command"),
    ({**assign("w", 200, 100, 1)}, "bad_command"),
    ({**assign("w", 0, 1, 10_001)}, "bad_command"),
    (command("Reboot"), "bad_command"),
    (b"{not json", "bad_command"),
    (command("MaxThreadsSet", namespace="other", max=1), "namespace_mismatch"),
])
def test_bad_commands_are_dead_lettered_with_their_reason(value: dict | bytes, reason: str) -> None:
    s = Script()
    outputs = s.feed(value)
    assert [o["type"] for o in outputs] == ["DeadLetter"] and outputs[0]["reason_code"] == reason


def test_finishing_a_pending_job_is_dead_lettered() -> None:
    s = Script()
    uuid = s.feed(assign("w", 10, 10, 1))[0]["uuids"][0]
    assert s.feed(command("JobFinished", uuid=uuid))[0]["reason_code"] == "not_running"


def test_health_says_running_caps_pending_and_lateness() -> None:
    s = Script()
    s.feed(command("MaxThreadsSet", max=1))
    s.feed(assign("w", 100, 100, 2))
    s.feed(tick(350))
    health = s.of("DispatcherHealth")[-1]
    assert (health["running"], health["max"], health["pending"], health["oldest_lateness_ms"]) == (1, 1, 1, 250)
    assert health["workers"] == {"w": {"running": 1, "max": None, "pending": 1}}
    assert [h["seq"] for h in s.of("DispatcherHealth")] == [1, 2, 3]


def test_the_table_entry_gives_back_a_state_that_decides_the_same() -> None:
    commands = [command("MaxThreadsSet", max=2), command("WorkerMaxSet", worker="a", max=1),
                assign("a", 0, 300, 3, max_retries=1, timeout_ms=50), assign("b", 100, 200, 2), tick(20)]
    later = [tick(100), tick(160), tick(400), tick(900)]
    whole = Script()
    whole.feed_all(commands)
    stored, jobs, offsets = dump(whole.state), buckets(whole.state), dict(whole.offsets)
    whole_after = whole.feed_all(later)
    restored = Script(load(stored, jobs))
    restored.offsets = offsets
    assert restored.feed_all(later) == whole_after
    assert dump(load(stored, jobs)) == stored and buckets(load(stored, jobs)) == jobs


def test_outputs_validate_against_their_models() -> None:
    from schemas import dispatch as models
    from schemas.records import DeadLetter

    s = Script()
    uuid = s.feed(assign("w", 0, 0, 1, max_retries=0, timeout_ms=10))[0]["uuids"][0]
    s.feed(tick(5))
    s.feed(command("JobFailed", uuid=uuid, error="x"))
    s.feed(command("JobFinished", uuid="gone"))
    kinds = {"JobStarted": models.JobStarted, "JobsAccepted": models.JobsAccepted,
             "DispatcherHealth": models.DispatcherHealth, "DeadLetter": DeadLetter}
    for emit in s.outputs:
        record = dict(emit.record)
        model = kinds.get(record["type"], models.JobOutcome)
        assert list(model.model_validate(record).model_dump(by_alias=True)) == list(record)
    assert s.outputs[0].key == NS
