"""A fold added by writing only the fold and its catalogue entry runs live, replays, verifies and explains."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from tests.helpers import Worker, produce_all, read_committed, running, tribunal, wait_until_ready

REPO = Path(__file__).resolve().parents[2]


def test_a_toy_fold_runs_live_replays_verifies_and_explains(worker_env: dict[str, str], kafka: str, unique: str,
                                                            tmp_path: Path) -> None:
    env = {**worker_env, "TRIBUNAL_FOLDS": "tests.worker.counter_fold:COUNTER",  # the catalogue entry
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    made = tribunal("topics", "create", env=env).stdout
    assert f"{unique}.tallies" in made and f"{unique}.tally-counts" in made and f"{unique}.tallies.dlq" in made
    with running(Worker(env, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
        topic = f"{unique}.tallies"
        produced = asyncio.run(produce_all(kafka, [(topic, b"a", b"x"), (topic, b"b", b"y"), (topic, b"a", b"z"),
                                                   (topic, b"a", None), (topic, b"b", b"w")]))
        counts = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.tally-counts", 4))]
        assert sorted((c["key"], c["seq"], c["count"]) for c in counts) == [
            ("a", 1, 1), ("a", 2, 2), ("b", 1, 1), ("b", 2, 2)], worker.log()[-3000:]
        [dead] = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{topic}.dlq", 1))]
        assert (dead["key"], dead["reason_code"]) == ("a", "empty_value")

        state = json.loads(tribunal("pools", "state", "--fold", "counter", "--key", "a", env=env).stdout)
        assert state == {"key": "a", "count": 2}

        exported, replayed = tmp_path / "log.jsonl", tmp_path / "replayed.jsonl"
        tribunal("audit", "export", "--topics", "tallies", "--output", str(exported), env=env)
        tribunal("audit", "replay", "--input", str(exported), "--output", str(replayed), env=env)
        derived = [json.loads(line)["value"] for line in replayed.read_text().splitlines()]
        assert sorted(map(json.dumps, [d for d in derived if d["type"] == "TallyCount"])) == sorted(
            map(json.dumps, counts))

        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=env).stdout
        assert "verified: 5 output records of 5 input records agree" in verified

        partition, offset = produced[2]  # the third record: key a's second
        found = json.loads(tribunal("audit", "explain", "--cause", f"tallies:{partition}:{offset}", "--json",
                                    env=env).stdout)
        assert (found["fold"], found["before"], found["after"]) == (
            "counter", {"key": "a", "count": 1}, {"key": "a", "count": 2})
        text = tribunal("audit", "explain", "--cause", f"tallies:{partition}:{offset}", env=env).stdout
        assert '"count": 2' in text and "output" in text
        assert worker.alive
