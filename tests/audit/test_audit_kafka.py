"""Audit against the real broker: export, replay --from-kafka --verify, and a forged decision found."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from streams.clients import envelope
from streams.groups.scheduler import over_threshold
from streams.topics import SCHEDULER_ALERTS
from tests.audit.browser import assert_shows_plots
from tests.core.pools.builders import seed_policy
from tests.core.pools.test_justice import justice_policy
from tests.helpers import Worker, agreed, produce_all, read_committed, tribunal


def seed_the_log(kafka: str, unique: str, worker: Worker) -> list[dict[str, object]]:
    p = f"{unique}."
    asyncio.run(produce_all(kafka, [(p + "policies", b"pool-a", json.dumps(seed_policy()).encode())]))
    assert len(asyncio.run(read_committed(kafka, p + "scaling-decisions", 1))) == 1, worker.log()[-3000:]
    metrics = [("ats", 55), ("hadoop", 70), ("ats", 75), ("ats", 30), ("Hadoop", 90), ("nobody", 10), ("ats", 101)]
    asyncio.run(produce_all(kafka, [(p + "plugin_decider", b"pool-a", envelope(a, m, "plugin_decider"))
                                    for a, m in metrics]))
    decisions = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, p + "scaling-decisions", 6))]
    # Justice for the same pool, on its own topic: its outcomes are verified too.
    asyncio.run(produce_all(kafka, [(p + "policies", b"pool-a", json.dumps(justice_policy()).encode())]))
    assert len(asyncio.run(read_committed(kafka, p + "justice-outcomes", 1))) == 1, worker.log()[-3000:]
    asyncio.run(produce_all(kafka, [(p + "plugin_justice", b"pool-a", envelope("ats", 85, "plugin_justice"))]))
    assert len(asyncio.run(read_committed(kafka, p + "justice-outcomes", 2))) == 2, worker.log()[-3000:]
    return decisions


def test_export_replay_verify_and_a_forged_decision(kafka: str, unique: str, worker: Worker,
                                                    worker_env: dict[str, str], tmp_path: Path) -> None:
    decisions = seed_the_log(kafka, unique, worker)
    assert len(decisions) == 6

    exported = tmp_path / "log.jsonl"
    tribunal("audit", "export", "--topics", "policies,plugin_decider", "--output", str(exported), env=worker_env)
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [r["topic"] for r in rows] == [f"{unique}.policies"] + [f"{unique}.plugin_decider"] * 7 + [
        f"{unique}.policies"]
    assert [r["offset"] for r in rows[1:-1]] == list(range(7))
    ranged_export = tmp_path / "ranged.jsonl"
    tribunal("audit", "export", "--topics", "plugin_decider", "--from", "3", "--to", "5", "--output",
             str(ranged_export),
             env=worker_env)
    assert [json.loads(line)["offset"] for line in ranged_export.read_text().splitlines()] == [3, 4]
    replayed = tmp_path / "replayed.jsonl"
    tribunal("audit", "replay", "--input", str(exported), "--output", str(replayed), env=worker_env)
    raw, raw_replayed = tmp_path / "log.raw", tmp_path / "raw-replayed.jsonl"  # the raw form: the same records
    tribunal("audit", "export", "--topics", "policies,plugin_decider", "--raw", "--output", str(raw), env=worker_env)
    assert raw.read_bytes().count(b"\t") == len(rows) and raw.read_bytes() != exported.read_bytes()
    tribunal("audit", "replay", "--input", str(raw), "--output", str(raw_replayed), "--jobs", "2", env=worker_env)
    assert raw_replayed.read_bytes() == replayed.read_bytes()
    derived = [json.loads(line)["value"] for line in replayed.read_text().splitlines()]
    assert [d for d in derived if d["type"] == "ScalingDecision"] == decisions
    assert [d["type"] for d in derived].count("JusticeOutcome") == 1  # the justice metric was not exported
    assert sorted(d["reason_code"] for d in derived if d["type"] == "DeadLetter") == ["bad_metric", "unknown_app"]

    from_kafka = tmp_path / "from-kafka.jsonl"
    tribunal("audit", "replay", "--from-kafka", "--output", str(from_kafka), env=worker_env)
    from_topics = [json.loads(line)["value"] for line in from_kafka.read_text().splitlines()]
    assert [d for d in from_topics if d["type"] != "JusticeOutcome"] == [
        d for d in derived if d["type"] != "JusticeOutcome"]
    justice_outcomes = [d["outcome"] for d in from_topics if d["type"] == "JusticeOutcome"]
    assert len(justice_outcomes) == 2 and justice_outcomes[0] == "policy"

    # A scheduler's own alert is written beside the fold's outputs, not among them: verify still agrees.
    asyncio.run(produce_all(kafka, [(f"{unique}.{SCHEDULER_ALERTS}", b"g", over_threshold("g", "s1", 12, 10))]))
    ok = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert agreed(ok.stdout, 10) >= 10

    # Verify over a range: from the fourth metric on.
    ranged = tribunal("audit", "replay", "--from-kafka", "--verify", "--from", "3", env=worker_env)
    assert agreed(ranged.stdout, 4) >= 4  # plugin_decider offsets 3..6

    # explain: the numbers are the decision record's own, and before + moves = after.
    for d in decisions[1:]:
        found = json.loads(tribunal("audit", "explain", "--pool", "pool-a", "--seq", str(d["seq"]), "--json",
                                    env=worker_env).stdout)
        why = found["decision"]
        assert (why["requested"], why["granted"], why["outcome"], why["reason"]) == (
            d["requested"], d["granted"], d["outcome"], d["reason"])
        assert [m for moves in why["rounds"].values() for m in moves] == d["moves"]
        assert why["instances_after"] == d["instances"]
        assert {a["app"]: a["instances"] for a in found["after"]["decider"]["apps"]} == d["instances"]
        before = {a["app"]: a["instances"] for a in found["before"]["decider"]["apps"]}
        for m in d["moves"]:
            before[m["from"]] = before.get(m["from"], 0) - m["count"]
            before[m["to"]] = before.get(m["to"], 0) + m["count"]
        assert {k: v for k, v in before.items() if k != "free"} == d["instances"]
        assert found["input"]["offset"] == d["cause"]["offset"]
        assert sum(1 for r in why.get("ranges", []) if r["matched"]) == 1
    cause = decisions[3]["cause"]
    text = tribunal("audit", "explain", "--cause", f"plugin_decider:{cause['partition']}:{cause['offset']}",
                    env=worker_env).stdout
    assert f"decision seq {decisions[3]['seq']}" in text and "<- this one" in text and "reason" in text

    # The audit report: plots and every decision linked to its explanation, in a real browser.
    page = tmp_path / "report.html"
    tribunal("audit", "report", "--pool", "pool-a", "--output", str(page), env=worker_env)
    dom = assert_shows_plots(page, tmp_path, plots=3)
    assert dom.count("href=\"#explain-") == 10 and dom.count("id=\"explain-") == 10
    assert decisions[3]["reason"] in dom

    forged = {**decisions[3], "instances": {"ats": 10, "hadoop": 0}, "seq": 7}
    asyncio.run(produce_all(kafka, [(f"{unique}.scaling-decisions", b"pool-a", json.dumps(forged).encode())]))
    caught = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env, check=False)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "divergence on" in caught.stdout and '"instances": {"ats": 10' in caught.stdout.replace('":{', '": {')
    assert "derived:  nothing" in caught.stdout
    assert worker.alive
