"""Justice (SPEC §3): the seed's document as written, targets, deltas, gaps, and the driver rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from schemas.decisions import JusticeOutcome
from streams.core import pools
from streams.policy_files import as_record
from tests.core.pools.builders import Log

SEED_JUSTICE = Path(__file__).resolve().parents[3] / "examples" / "justice-ats-hadoop.json"


def justice_policy(capacity: int | None = 20) -> dict[str, Any]:
    record = as_record(yaml.safe_load(SEED_JUSTICE.read_text()), version="v1")
    if capacity is not None:
        record["capacity"] = capacity
    return record


def outcome(outputs: list[Any]) -> dict[str, Any]:
    [out] = outputs
    assert out.stream == pools.JUSTICE_OUTCOMES, json.loads(out.value_bytes())
    result: dict[str, Any] = json.loads(out.value_bytes())
    assert JusticeOutcome.model_validate(result).model_dump(mode="json") == result
    return result


def test_the_seeds_document_drives_the_split() -> None:
    log = Log()
    adopted = outcome(log.policy(justice_policy()))
    assert (adopted["outcome"], adopted["targets"], adopted["metrical"]) == ("policy", {}, None)
    first = outcome(log.metric("ats", 10, pools.PLUGIN_JUSTICE))
    assert first["outcome"] == "applied" and first["rule"] == [0.0, 20.0]
    assert first["targets"] == {"ats": 5, "hadoop:latest": 15}
    assert first["deltas"] == {"ats": 5, "hadoop:latest": 15} and first["changed"] is True

    same = outcome(log.metric("ATS", 15, pools.PLUGIN_JUSTICE))
    assert same["changed"] is False and same["deltas"] == {"ats": 0, "hadoop:latest": 0}

    busier = outcome(log.metric("ats", 45, pools.PLUGIN_JUSTICE))
    assert busier["targets"] == {"ats": 15, "hadoop:latest": 5}
    assert busier["deltas"] == {"ats": 10, "hadoop:latest": -10}

    gap = outcome(log.metric("ats", 80, pools.PLUGIN_JUSTICE))
    assert gap["outcome"] == "no_rule" and gap["targets"] == busier["targets"] and gap["changed"] is False
    assert [first["seq"], same["seq"], busier["seq"], gap["seq"]] == [2, 3, 4, 5]


def test_only_the_driver_drives() -> None:
    log = Log()
    log.policy(justice_policy())
    [out] = log.metric("hadoop:latest", 90, pools.PLUGIN_JUSTICE)
    assert out.stream == "dlq" and json.loads(out.value_bytes())["reason_code"] == "not_driver"
    [out] = log.metric("redis", 90, pools.PLUGIN_JUSTICE)
    assert json.loads(out.value_bytes())["reason_code"] == "unknown_app"


def test_targets_over_capacity_reject_the_policy() -> None:
    log = Log()
    [out] = log.policy(justice_policy(capacity=19))
    letter = json.loads(out.value_bytes())
    assert letter["reason_code"] == "bad_policy" and "more than capacity 19" in letter["reason"]
