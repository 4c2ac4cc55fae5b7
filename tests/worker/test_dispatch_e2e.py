"""The dispatcher live: commands and ticks through a real worker, starts under the caps, replay and explain agree."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from tests.audit.browser import assert_shows_plots
from tests.core.dispatch.script import command
from tests.helpers import Worker, produce_all, read_committed, running, tribunal, wait_until_ready

NS = "ns-live"
HOUR = 3_600_000


def _cmd(kind: str, **fields: object) -> bytes:
    return json.dumps(command(kind, namespace=NS, **fields)).encode()


def test_jobs_start_under_the_caps_finish_frees_a_slot_and_replay_agrees(worker_env: dict[str, str], kafka: str,
                                                                         unique: str, tmp_path: Path) -> None:
    tribunal("topics", "create", env=worker_env)
    commands = f"{unique}.dispatch-commands"  # no Ticks: the commands date themselves (a Tick in the same
    # millisecond as a command changes nothing and has no output, and replay cannot place such a record exactly)
    with running(Worker(worker_env, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
        jobs = [{"external_id": f"e{i}", "info": f"job {i}", "max_retries": 0, "timeout_ms": 60_000} for i in range(3)]
        sent = int(time.time() * 1000)
        asyncio.run(produce_all(kafka, [
            (commands, NS.encode(), _cmd("MaxThreadsSet", max=5)),
            (commands, NS.encode(), _cmd("WorkerMaxSet", worker="w1", max=2)),
            (commands, NS.encode(), _cmd("JobsAssigned", worker="w1", start=1_000, end=3_000, jobs=jobs,
                                         request_id="r1")),
            (commands, NS.encode(), _cmd("JobFinished", uuid="no-such-job")),
        ], first_timestamp=sent + HOUR))  # a producer whose clock is an hour ahead: the broker dates its records
        written = int(time.time() * 1000)
        starts = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.job-starts", 2))]
        assert [(s["external_id"], s["attempt"]) for s in starts] == [("e0", 1), ("e1", 1)], worker.log()[-3000:]
        # the worker cap holds e2 back; the starts are dated by their assign, as the broker stamped it
        for s in starts:  # no earlier than the record that caused them (a Tick read before the assign may be later)
            assert s["cause"]["timestamp"] <= s["started_at"] <= written + 1_000, (sent, starts, written)
            assert s["started_at"] >= sent - 1_000 and s["deadline"] == s["started_at"] + 60_000
        [dead] = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{commands}.dlq", 1))]
        assert dead["reason_code"] == "unknown_job"

        asyncio.run(produce_all(kafka, [(commands, NS.encode(), _cmd("JobFinished", uuid=starts[0]["uuid"]))]))
        starts = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.job-starts", 3))]
        assert starts[2]["external_id"] == "e2"
        outcomes = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.job-outcomes", 2))]
        assert [o["type"] for o in outcomes] == ["JobsAccepted", "JobFinished"]
        assert outcomes[0]["request_id"] == "r1" and outcomes[0]["uuids"][0] == starts[0]["uuid"]

        state = json.loads(tribunal("pools", "state", "--fold", "dispatch", "--key", NS, env=worker_env).stdout)
        assert (state["running"], state["max"], state["workers"]["w1"]) == (
            2, 5, {"running": 2, "max": 2, "pending": 0})

        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env).stdout
        assert "verified:" in verified and "agree" in verified

        cause = starts[2]["cause"]
        text = tribunal("audit", "explain", "--cause", f"dispatch-commands:{cause['partition']}:{cause['offset']}",
                        env=worker_env).stdout
        assert "started" in text and "worker ran 1 (cap 2)" in text and "#1 in the startable queue" in text
        history = tribunal("audit", "explain", "--job", starts[2]["uuid"], env=worker_env).stdout
        assert "its worker was at its cap" in history and "worker ran 2 (cap 2)" in history, history  # ticks and
        # commands are two topics: whether the ticks came before the assign varies, what held e2 after it does not
        by = f"{commands}[{cause['partition']}]@{cause['offset']}"
        assert f"started   attempt 1 at {starts[2]['started_at']} by {by}" in history, history

        page = tmp_path / "report.html"  # running against the caps, per worker, and the starts' lateness
        tribunal("audit", "report", "--namespace", NS, "--output", str(page), env=worker_env)
        dom = assert_shows_plots(page, tmp_path, 3)
        assert "Lateness of 3 starts" in dom and "<td>JobsAssigned</td>" in dom and "JobStarted 2" in dom
        assert worker.alive


def test_an_assign_of_ten_thousand_jobs_is_stored_in_buckets_and_survives_a_kill(
        worker_env: dict[str, str], kafka: str, unique: str, tmp_path: Path) -> None:
    """The schema's largest assign: its namespace's state is over Kafka's 1 MB request as one entry,
    so the jobs are stored in buckets; a SIGKILLed worker recovers them all from the changelogs."""
    tribunal("topics", "create", env=worker_env)
    commands = f"{unique}.dispatch-commands"
    with running(Worker(worker_env, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
        jobs = [{"external_id": f"e{i}", "info": f"{i:030d}", "timeout_ms": 60_000} for i in range(10_000)]
        asyncio.run(produce_all(kafka, [
            (commands, NS.encode(), _cmd("MaxThreadsSet", max=3)),
            (commands, NS.encode(), _cmd("JobsAssigned", worker="w1", start=0, end=10_000, jobs=jobs)),
        ]))
        starts = asyncio.run(read_committed(kafka, f"{unique}.job-starts", 3))
        assert len(starts) == 3, worker.log()[-3000:]
        worker.kill()
        worker.start()
        wait_until_ready(worker, 2)
        state = json.loads(tribunal("pools", "state", "--fold", "dispatch", "--key", NS, env=worker_env).stdout)
        assert (state["running"], state["pending"], state["workers"]["w1"]["pending"]) == (3, 9_997, 9_997)
        asyncio.run(produce_all(kafka, [(commands, NS.encode(),
                                         _cmd("JobFinished", uuid=json.loads(starts[0].value)["uuid"]))]))
        starts = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.job-starts", 4))]
        assert starts[3]["external_id"] == "e3"
        assert "writing a batch failed" not in worker.log(), worker.log()[-3000:]
