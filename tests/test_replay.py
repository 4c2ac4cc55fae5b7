"""`tribunal replay` over an exported log: the seed's worked example, dead letters, exact bytes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests.core.builders import seed_policy
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
    assert all(r["key"] == "pool-a" for r in rows[:6])

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
