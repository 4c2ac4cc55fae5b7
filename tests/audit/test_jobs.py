"""`explain --job`: a job's waits, start and outcomes, derived by replaying its namespace's log."""

from __future__ import annotations

import json

import pytest

from streams.audit.jobs import job_history, namespace_of, render_history
from streams.audit.kafka_log import KafkaLog
from streams.core import dispatch
from streams.core.source import SourceRecord
from streams.errors import NotFound
from streams.replay import Replayer
from streams.settings import Settings
from tests.core.dispatch.script import NS, Script, assign, command, tick


def logged(values: list[dict[str, object]]) -> KafkaLog:
    """The records as a log a worker has decided: inputs and the outputs it recorded."""
    script = Script()
    inputs = [script.record(v)[0] for v in values]
    recorded: dict[tuple[str, str], list[SourceRecord]] = {}
    replayer = Replayer()
    for record in inputs:
        for out in replayer.feed(record):
            recorded.setdefault((out.topic, out.key), []).append(
                SourceRecord(out.topic, out.partition, out.offset, out.timestamp, out.key.encode(), out.value))
    return KafkaLog(inputs, recorded, list(dispatch.INPUTS))


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
    assert started["by"]["offset"] == 7 and started["attempt"] == 1  # the finish of the first freed the slot
    assert (started["namespace_running"], started["place_in_queue_before"]) == (0, 1)
    assert history["steps"][-1]["final"] is True

    text = render_history(history)
    assert "the namespace was at its cap" in text and "namespace ran 1 of 1" in text
    assert "started   attempt 1 at 1200" in text and "final     JobFailedFinally" in text


def test_the_namespace_is_found_from_the_recorded_acceptance() -> None:
    log, first, _ = scenario()
    assert namespace_of(log, Settings(), first) == NS
    assert json.dumps(job_history(log, Settings(), first))  # found without --namespace
    with pytest.raises(NotFound):
        namespace_of(log, Settings(), "00000000-0000-5000-8000-000000000000")
