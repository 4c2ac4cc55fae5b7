"""`tribunal replay` over an exported log: the seed's worked example, dead letters, exact bytes."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from streams.clients import envelope
from streams.core.source import SourceRecord
from streams.lines import output_line
from streams.replay.parallel import derive_all
from streams.replay.replayer import Replayer
from tests.core.pools.builders import seed_policy
from tests.helpers import tribunal


def line(topic: str, offset: int, value: Any, key: str | None = "pool-a", **extra: Any) -> str:
    row = {"topic": topic, "partition": 0, "offset": offset, "timestamp": 1_732_200_000_000 + offset,
           "key": key, "value": value, **extra}
    return json.dumps(row)


def metric(app: str, metrical: float) -> dict[str, str]:
    return {"Command": "app-metrical", "Channel": "plugin_decider",
            "Body": json.dumps({"App": app, "Metrical": metrical})}


def worked_example_log(path: Path) -> None:
    lines = [line("policies", 0, seed_policy())]
    for offset, (app, value) in enumerate([("ats", 55), ("hadoop", 70), ("ats", 75), ("ats", 30), ("Hadoop", 90)]):
        lines.append(line("plugin_decider", offset, metric(app, value)))
    lines.append(line("plugin_decider", 5, None, value_b64=base64.b64encode(b"not json").decode()))
    lines.append(line("scaling-decisions", 0, {"an": "output line, not an input"}))
    lines.append(line("plugin_decider", 6, metric("ats", 55), key=None))  # pool default: no policy
    path.write_text("\n".join(lines) + "\n")


def test_the_seeds_worked_example_through_tribunal_replay(tmp_path: Path) -> None:
    log, out = tmp_path / "log.jsonl", tmp_path / "out.jsonl"
    worked_example_log(log)
    result = tribunal("replay", "--input", str(log), "--output", str(out))
    assert "replayed 8 records (1 skipped)" in result.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    decisions = [r["value"] for r in rows if r["topic"] == "scaling-decisions"]
    assert [(d["outcome"], d["instances"]["ats"], d["instances"]["hadoop"]) for d in decisions] == [
        ("policy", 5, 5), ("steady", 5, 5), ("rejected", 5, 5), ("partial", 8, 2), ("idle", 8, 2), ("partial", 3, 7)]
    assert [d["seq"] for d in decisions] == [1, 2, 3, 4, 5, 6]
    assert [d["cause"]["offset"] for d in decisions[1:]] == [0, 1, 2, 3, 4]
    assert all(r["key"] == "pool-a" for r in rows if r["topic"] == "scaling-decisions")
    latest = {r["key"]: r["value"] for r in rows if r["topic"] == "pool-instances"}  # as compaction keeps them
    assert {k: (v["instances"], v["seq"]) for k, v in latest.items()} == {"pool-a/ats": (3, 6), "pool-a/hadoop": (7, 6)}
    assert len([r for r in rows if r["topic"] == "pool-instances"]) == 6  # adopted (2), partial (2), partial (2)

    dead = [r for r in rows if r["topic"] == "plugin_decider.dlq"]
    assert [d["value"]["reason_code"] for d in dead] == ["bad_envelope", "no_policy"]
    assert base64.b64decode(dead[0]["value"]["original_value_b64"]) == b"not json"
    assert dead[1]["key"] == "default"


def test_replay_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    worked_example_log(log)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    tribunal("replay", "-i", str(log), "-o", str(first))
    tribunal("replay", "-i", str(log), "-o", str(second))
    assert first.read_bytes() == second.read_bytes() and first.stat().st_size > 0


def test_a_corrupt_line_is_reported_with_its_number(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(line("policies", 0, seed_policy()) + "\n{not a record\n")
    result = tribunal("replay", "-i", str(log), "-o", str(tmp_path / "out.jsonl"), check=False)
    assert result.returncode == 1 and "line 2 is not a record line" in result.stderr


def mixed_log(records: int, seed: int = 3) -> list[SourceRecord]:
    """Pools and scheduler groups, keyed and keyless, broken records and a topic no fold reads."""
    rng = random.Random(seed)
    log = [SourceRecord("policies", p % 2, p, p, f"pool-{p}".encode(), json.dumps(seed_policy()).encode())
           for p in range(5)]
    for i in range(records):
        kind = rng.random()
        if kind < 0.6:
            value = envelope(rng.choice(["ats", "hadoop"]), rng.randrange(101), "plugin_decider")
            log.append(SourceRecord("plugin_decider", i % 2, i, i, f"pool-{rng.randrange(6)}".encode(), value))
        elif kind < 0.9:
            group = f"g{rng.randrange(3)}"
            event = rng.choice([{"type": "SchedulerRegistered", "group": group, "scheduler": f"s{rng.randrange(4)}",
                                 "fault_tolerance": 1},
                                {"type": "JobCreated", "group": group, "job": f"j{rng.randrange(50)}"}])
            topic = "scheduler-events" if event["type"] == "SchedulerRegistered" else "job-events"
            log.append(SourceRecord(topic, i % 2, i, i, None, json.dumps(event).encode()))
        elif kind < 0.95:
            log.append(SourceRecord("plugin_decider", 0, i, i, b"pool-1", b"{broken"))
        else:
            log.append(SourceRecord("scaling-decisions", 0, i, i, b"pool-1", b"{}"))
    return log


@pytest.mark.parametrize("jobs", [2, 3])
def test_replay_on_several_processes_derives_the_same_bytes_in_the_same_order(jobs: int) -> None:
    log = mixed_log(600)
    alone, together = Replayer(), Replayer()
    expected = [(record, [output_line(row) for row in rows]) for record, rows in derive_all(log, alone)]
    got = [(record, [output_line(row) for row in rows])
           for record, rows in derive_all(log, together, jobs, chunk_size=37)]  # many chunks in flight
    assert got == expected
    assert sum(len(rows) for _, rows in got) > len(log) // 2
    assert together.counts == alone.counts and alone.counts["skipped"] > 0


def test_a_key_that_is_not_utf8_is_exported_and_read_back_exactly() -> None:
    from streams.lines import export_row, record_of

    for key in (b"\xc3\x28pool", b"pool-a", None):
        row = json.loads(json.dumps(export_row("policies", 0, 1, 2, key, b"{}")))
        assert record_of(row).key == key
        assert ("key_b64" in row) == (key == b"\xc3\x28pool")
