"""`explain --job`: a job's waits, start and outcomes, derived by replaying its namespace's log."""

from __future__ import annotations

import pytest

from streams.audit.jobs import job_history, namespace_of, render_history
from streams.audit.kafka_log import KafkaLog
from streams.core import dispatch
from streams.core.source import SourceRecord
from streams.errors import NotFound
from streams.replay.replayer import Replayer
from streams.settings import Settings
from tests.core.dispatch.script import NS, Script, assign, command, tick


def logged(values: list[dict[str, object]]) -> KafkaLog:
    """The records as a log a worker has decided: inputs and the outputs it recorded."""
    script = Script()
    return decided([script.record(v)[0] for v in values], list(dispatch.INPUTS))


def decided(inputs: list[SourceRecord], topics: list[str]) -> KafkaLog:
    """`inputs` (of `topics`) as a log a worker has decided: the inputs and the outputs it recorded."""
    recorded: dict[tuple[str, str], list[SourceRecord]] = {}
    replayer = Replayer()
    for record in inputs:
        for out in replayer.feed(record):
            recorded.setdefault((out.topic, out.key), []).append(
                SourceRecord(out.topic, out.partition, out.offset, out.timestamp, out.key.encode(), out.value))
    return KafkaLog(inputs, recorded, topics)


def scenario() -> tuple[KafkaLog, str, str]:
    """Cap 1; two jobs of w1 expected at 1,000 (acceptable 1,000 and 2,000); the first runs until it
    finishes, then the second starts, times out and fails for good."""
    log = logged([command("MaxThreadsSet", max=1), assign("w1", 1_000, 2_000, 2), tick(500), tick(1_000),
                  tick(1_100), tick(1_200), command("JobFinished", uuid=dispatch.job_uuid(dispatch.DISPATCH_COMMANDS,
                                                                                           0, 2, 0)),
                  tick(2_500), tick(5_000)])
    first, second = (dispatch.job_uuid(dispatch.DISPATCH_COMMANDS, 0, 2, i) for i in range(2))
    return log, first, second


def test_a_waiting_job_says_what_held_it_at_each_step_then_its_start_and_outcomes() -> None:
    log, _, second = scenario()
    history = job_history(log, Settings(), second, NS)
    steps = [(s["step"], s.get("reason") or s.get("type")) for s in history["steps"]]
    assert steps == [("assigned", None), ("waited", "expected_start"), ("waited", "namespace_cap"),
                     ("started", None), ("outcome", "JobTimedOut"), ("outcome", "JobFailedFinally")]
    pending, held, started = history["steps"][1:4]
    assert (pending["records"], pending["ticks"], pending["from"]["now"], pending["to"]["now"]) == (2, 1, 0, 500)
    assert (held["records"], held["ticks"], held["from"]["now"], held["to"]["now"]) == (3, 3, 1_000, 1_200)
    assert (held["namespace_running"], held["namespace_max"], held["place_first"]) == (1, 1, 1)
    assert started["by"]["offset"] == 3 and started["attempt"] == 1  # the finish of the first freed the slot
    assert (started["namespace_running"], started["place_in_queue_before"]) == (0, 1)
    assert history["steps"][-1]["final"] is True

    text = render_history(history)
    assert "the namespace was at its cap" in text and "namespace ran 1 of 1" in text
    assert "started   attempt 1 at 1200" in text and "final     JobFailedFinally" in text


def test_the_namespace_is_found_from_the_recorded_acceptance() -> None:
    log, first, _ = scenario()
    assert namespace_of(log, Settings(), first) == NS
    found = job_history(log, Settings(), first)  # without --namespace
    assert found["namespace"] == NS and [s["step"] for s in found["steps"]] == [
        "assigned", "waited", "started", "outcome"]
    with pytest.raises(NotFound):
        namespace_of(log, Settings(), "00000000-0000-5000-8000-000000000000")
    with pytest.raises(NotFound):
        job_history(log, Settings(), "00000000-0000-5000-8000-000000000000", NS)


def uuid_of(offset: int, index: int = 0) -> str:
    return dispatch.job_uuid(dispatch.DISPATCH_COMMANDS, 0, offset, index)


def test_a_job_held_by_its_worker_starts_under_the_cap_the_record_set() -> None:
    """Worker cap 1: the second job waits for its worker, not the namespace; a WorkerMaxSet of 2 starts
    it, and the start is explained under the new cap."""
    log = logged([command("WorkerMaxSet", worker="w1", max=1), assign("w1", 0, 0, 2), tick(10),
                  command("WorkerMaxSet", worker="w1", max=2)])
    steps = job_history(log, Settings(), uuid_of(2, 1), NS)["steps"]
    assert [(s["step"], s.get("reason")) for s in steps] == [("assigned", None), ("waited", "worker_cap"),
                                                             ("started", None)]
    assert (steps[1]["worker_running"], steps[1]["worker_max"], steps[1]["place_first"]) == (1, 1, 1)
    assert (steps[2]["worker_running"], steps[2]["worker_max"]) == (1, 2)
    assert "worker ran 1 (cap 2); it was #1 in the startable queue" in render_history(
        job_history(log, Settings(), uuid_of(2, 1), NS))


def test_a_retried_attempt_says_it_was_retried_and_its_place_is_tracked_over_a_wait() -> None:
    """Cap 1, two jobs; the first times out, is retried in its old place ahead of the second, and runs
    again at once (attempt 2, retried with this record); the second's place stays 1 over its wait."""
    log = logged([command("MaxThreadsSet", max=1), assign("w1", 0, 0, 2, max_retries=1, timeout_ms=100),
                  tick(10), tick(50), tick(200)])
    first = job_history(log, Settings(), uuid_of(2, 0), NS)
    starts = [s for s in first["steps"] if s["step"] == "started"]
    assert [s["attempt"] for s in starts] == [1, 2]
    assert "it was retried with this record" in render_history(first)
    wait = next(s for s in job_history(log, Settings(), uuid_of(2, 1), NS)["steps"] if s["step"] == "waited")
    assert (wait["reason"], wait["records"], wait["place_first"], wait["place_last"]) == ("namespace_cap", 4, 1, 1)


def test_a_job_cancelled_while_pending_ends_its_history() -> None:
    log = logged([assign("w1", 1_000, 1_000, 1), tick(10), command("JobCancelled", uuid=uuid_of(1)), tick(2_000)])
    steps = job_history(log, Settings(), uuid_of(1), NS)["steps"]
    assert [(s["step"], s.get("type")) for s in steps] == [("assigned", None), ("waited", None),
                                                           ("outcome", "JobCancelled")]
    assert steps[1]["reason"] == "expected_start" and steps[-1]["final"] is True


def test_explain_shows_what_a_refused_commands_time_made_due_beside_its_dead_letter() -> None:
    from streams.audit.explain import explanations, render

    script = Script()
    inputs = [script.record(assign("w1", 0, 0, 1, timeout_ms=1_000), at=1_000)[0],
              script.record(command("JobFinished", uuid="no-such-job"), at=5_000)[0]]
    found = list(explanations(decided(inputs, list(dispatch.INPUTS)), Settings(), lambda r: True))
    text = render(found[-1])
    assert "dead letter: unknown_job" in text and "JobTimedOut" in text, text


def test_a_late_finish_shows_as_refused_between_the_retry_and_its_own_finish() -> None:
    script = Script()
    inputs = [script.record(assign("w1", 1_000, 1_000, 1, max_retries=1, timeout_ms=1_000), at=1_000)[0],
              script.record(tick(2_000))[0],
              script.record(command("JobFinished", uuid=uuid_of(1), attempt=1), at=2_500)[0],
              script.record(command("JobFinished", uuid=uuid_of(1), attempt=2), at=2_600)[0]]
    history = job_history(decided(inputs, list(dispatch.INPUTS)), Settings(), uuid_of(1), NS)
    steps = [(s["step"], s.get("type"), s.get("attempt")) for s in history["steps"]]
    assert steps == [("assigned", None, None), ("started", None, 1), ("outcome", "JobTimedOut", 1),
                     ("outcome", "JobRetryScheduled", 1), ("started", None, 2), ("refused", "JobFinished", 1),
                     ("outcome", "JobFinished", 2)]
    assert "refused   JobFinished (attempt 1) by dispatch-commands[0]@2" in render_history(history)
    assert "late_report" in render_history(history)


def test_each_step_names_who_sent_the_command_behind_it_and_a_wait_who_set_the_cap() -> None:
    """Issue 56: the history says who assigned, failed, finished or cancelled the job and who set the caps that held
    it, where the commands name their senders (`principal`); a command without one is said as before."""
    log = logged([command("MaxThreadsSet", max=1, principal="ops"), assign("w1", 0, 0, 2) | {"principal": "team-a"},
                  command("JobFailed", uuid=uuid_of(2), error="boom", principal="team-a"),
                  command("JobCancelled", uuid=uuid_of(2, 1), principal="ops")])
    second = job_history(log, Settings(), uuid_of(2, 1), NS)
    by_step = [(s["step"], s.get("type"), s.get("principal")) for s in second["steps"]]
    assert by_step[0] == ("assigned", None, "team-a") and by_step[-1] == ("outcome", "JobCancelled", "ops")
    waits = [s for s in second["steps"] if s["step"] == "waited"]
    assert waits and all(w["namespace_max_set_by"] == "ops" and w["worker_max_set_by"] is None for w in waits)
    text = render_history(second)
    assert "to worker w1; sent by team-a" in text and "(the namespace's cap set by ops)" in text
    assert text.splitlines()[-1].endswith("; sent by ops")
    first = render_history(job_history(log, Settings(), uuid_of(2), NS))
    assert "boom; sent by team-a" in first
    unsigned = logged([assign("w1", 0, 0, 1), command("JobCancelled", uuid=uuid_of(1))])
    assert "sent by" not in render_history(job_history(unsigned, Settings(), uuid_of(1), NS))
