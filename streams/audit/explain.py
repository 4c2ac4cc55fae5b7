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
from streams.lines import Output
from streams.replay.replayer import Replayer
from streams.settings import Settings


def parse_cause(text: str) -> Coordinates:
    try:
        topic, partition, offset = text.rsplit(":", 2)
        return (topic, int(partition), int(offset))
    except ValueError:
        raise NotFound(f"--cause wants TOPIC:PARTITION:OFFSET, not {text!r}") from None


def cause_of_seq(log: KafkaLog, settings: Settings, stream: str, key: str, seq: int, field: str = "seq"
                 ) -> Coordinates:
    """The input that caused the first record of output `stream` for `key` whose `field` is `seq` (a shard
    plan's epoch, say: the input that made it)."""
    topic = settings.topic(stream)
    for record in log.recorded.get((topic, key), []):
        value = orjson.loads(record.value or b"{}")
        if value.get(field) == seq:
            c = value["cause"]
            return (c["topic"], int(c["partition"]), int(c["offset"]))
    raise NotFound(f"{topic} has no record with {field} {seq} for {key!r}")


def replayed(log: KafkaLog, settings: Settings, only: tuple[str, str] | None = None
             ) -> Iterator[tuple[SourceRecord, tuple[str, str], Any, Any, list[Output]]]:
    """The log's input records in the order the worker applied them, each folded: its (fold, key), that
    key's state before and after it, and its outputs. With `only`, that key's records alone: keys are
    independent, so the others need not be folded."""
    replayer = Replayer(topic_prefix=settings.topic_prefix)
    for record in log.ordered():
        slot = scope(record, settings.topic_prefix)
        if slot is None or (only is not None and slot != only):
            continue
        before = replayer.states.get(slot) or BY_NAME[slot[0]].empty()
        rows = replayer.feed(record)
        yield record, slot, before, replayer.states[slot], rows


def explanations(log: KafkaLog, settings: Settings, wanted: Callable[[SourceRecord], bool],
                 until: Coordinates | None = None, describe: Callable[[str, Any], dict[str, Any]] | None = None,
                 only: tuple[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """Explain every input `wanted` picks (of the key `only`, if given), replaying the log in applied
    order (stops after `until`); `describe` in place of the fold's own."""
    for record, (name, key), before, after, rows in replayed(log, settings, only):
        if wanted(record):
            fold = BY_NAME[name]
            yield explain_one(record, fold, key, before, after, [orjson.loads(out.value) for out in rows],
                              describe, _self_contained(fold, (name, key), before, record, settings))
            if until is not None and coordinates(record) == until:
                return


def explain(log: KafkaLog, settings: Settings, target: Coordinates) -> dict[str, Any]:
    for found in explanations(log, settings, lambda r: coordinates(r) == target, until=target):
        return found
    raise NotFound(f"no input {target[0]}[{target[1]}]@{target[2]} in the log")


def _self_contained(fold: Fold[Any], slot: tuple[str, str], before: Any, record: SourceRecord,
                    settings: Settings) -> list[dict[str, Any]] | None:
    """The record's outputs as they would read if each stated the whole picture (a `decisions: changes` pool's
    decision, folded again as a whole one), or None where they do already."""
    whole = fold.self_contained(before) if fold.self_contained is not None else before
    if whole is before:
        return None
    again = Replayer(topic_prefix=settings.topic_prefix)
    again.states[slot] = whole
    return [orjson.loads(out.value) for out in again.feed(record)]


def explain_one(record: SourceRecord, fold: Fold[Any], key: str, before: Any, after: Any,
                outputs: list[dict[str, Any]],
                describe: Callable[[str, Any], dict[str, Any]] | None = None,
                whole: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The input, the key's state before and after (the fold's `describe`), its outputs, and what the fold adds
    (from `whole`, the outputs stating the whole picture, where the recorded ones state what changed)."""
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
    out.update(fold.explain(before, outputs if whole is None else whole))
    return out


def render(found: dict[str, Any]) -> str:
    """The explanation as an operator reads it: the input, and a dead letter's reason or the fold's own lines."""
    i = found["input"]
    lines = [f"input   {i['topic']}[{i['partition']}]@{i['offset']} (timestamp {i['timestamp']}, key {i['key']})",
             f"        {i['value']}"]
    if "rejected" not in found:
        return "\n".join(lines + BY_NAME[found["fold"]].render(found))
    lines.append(f"result  dead letter: {found['rejected']['reason_code']}: {found['rejected']['reason']}")
    if any(o["type"] != "DeadLetter" for o in found["outputs"]):  # what its time made due came first (a
        lines += BY_NAME[found["fold"]].render(found)  # dispatcher namespace's timeouts): shown too
    return "\n".join(lines)
