"""Why a decision was made: its input, the state before, the rounds, the state after, the reason.

The explanation is derived, not stored: the log is replayed (in the order the worker applied it)
up to the decision's input, so what it shows is what the pure core computes from the log, and its
numbers are the decision record's own. `explanations` does this for every input of one key in one
pass, for the audit report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from streams.audit.kafka_log import KafkaLog
from streams.audit.order import Coordinates, coordinates
from streams.core.folds import BY_NAME, Fold, scope
from streams.core.source import SourceRecord
from streams.errors import NotFound
from streams.replay import Replayer
from streams.settings import Settings


def parse_cause(text: str) -> Coordinates:
    try:
        topic, partition, offset = text.rsplit(":", 2)
        return (topic, int(partition), int(offset))
    except ValueError:
        raise NotFound(f"--cause wants TOPIC:PARTITION:OFFSET, not {text!r}") from None


def cause_of_seq(log: KafkaLog, settings: Settings, stream: str, key: str, seq: int) -> Coordinates:
    """The input that caused record `seq` of output `stream` for `key`."""
    topic = settings.topic(stream)
    for record in log.recorded.get((topic, key), []):
        value = orjson.loads(record.value or b"{}")
        if value.get("seq") == seq:
            c = value["cause"]
            return (c["topic"], int(c["partition"]), int(c["offset"]))
    raise NotFound(f"{topic} has no record with seq {seq} for {key!r}")


def explanations(log: KafkaLog, settings: Settings, wanted: Callable[[SourceRecord], bool],
                 until: Coordinates | None = None,
                 describe: Callable[[str, Any], dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """Explain every input `wanted` picks, replaying the log in applied order (stops after `until`);
    `describe` in place of the fold's own (a lighter one for a report of many records)."""
    replayer = Replayer(topic_prefix=settings.topic_prefix)
    for record in log.ordered():
        slot = scope(record, settings.topic_prefix)
        if slot is None or not wanted(record):
            replayer.feed(record)
            continue
        fold = BY_NAME[slot[0]]
        before = replayer.states.get(slot) or fold.empty()
        rows = replayer.feed(record)
        after = replayer.states[slot]
        yield explain_one(record, fold, slot[1], before, after, [orjson.loads(out.value) for out in rows], describe)
        if until is not None and coordinates(record) == until:
            return


def explain(log: KafkaLog, settings: Settings, target: Coordinates) -> dict[str, Any]:
    for found in explanations(log, settings, lambda r: coordinates(r) == target, until=target):
        return found
    raise NotFound(f"no input {target[0]}[{target[1]}]@{target[2]} in the log")


def explain_one(record: SourceRecord, fold: Fold[Any], key: str, before: Any, after: Any,
                outputs: list[dict[str, Any]],
                describe: Callable[[str, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The input, the key's state before and after (the fold's `describe`), its outputs, and what the fold adds."""
    describe = describe or fold.describe
    text = (record.value or b"").decode("utf-8", "replace")
    out: dict[str, Any] = {
        "input": {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                  "timestamp": record.timestamp, "key": key, "value": text},
        "fold": fold.name, "key": key, "outputs": outputs,
        "before": describe(key, before), "after": describe(key, after)}
    for output in outputs:
        if output["type"] == "DeadLetter":
            out["rejected"] = {"reason_code": output["reason_code"], "reason": output["reason"]}
    out.update(fold.explain(before, outputs))
    return out


def render(found: dict[str, Any]) -> str:
    """The explanation as an operator reads it: the input, a dead letter's reason, and the fold's own lines."""
    i = found["input"]
    lines = [f"input   {i['topic']}[{i['partition']}]@{i['offset']} (timestamp {i['timestamp']}, key {i['key']})",
             f"        {i['value']}"]
    if "rejected" in found:
        lines.append(f"result  dead letter: {found['rejected']['reason_code']}: {found['rejected']['reason']}")
    return "\n".join(lines + BY_NAME[found["fold"]].render(found))


def wanted_for(settings: Settings, fold_name: str, key: str) -> Callable[[SourceRecord], bool]:
    """Inputs of one pool or group."""
    def wanted(record: SourceRecord) -> bool:
        return scope(record, settings.topic_prefix) == (fold_name, key)
    return wanted

