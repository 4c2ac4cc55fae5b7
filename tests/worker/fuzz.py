"""Records for the fuzz test: for every input topic, valid records that each yield an output, and bad ones.

Bad records come in the kinds an operator meets: random bytes, truncated JSON, wrong types, huge
values, unknown commands or event types, 1 MB bodies, invalid UTF-8 (in the value or the key),
missing fields and keys of tens of kilobytes. Each is built so that no reading of it is valid: a
proper prefix of a JSON object is never JSON, a field of the wrong type is one pydantic will not
coerce, and so on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from streams.clients import envelope
from tests.core.dispatch.script import command, tick
from tests.core.pools.builders import seed_policy
from tests.core.pools.test_justice import justice_policy

POOL, GROUP, NAMESPACE, JOB_SET = "pool-f", "g-f", "ns-f", "js-f"
HUGE_BODY = 1_000_000  # bytes: under the broker's default 1 MiB record limit, with the key and headers

Record = tuple[bytes | None, bytes | None]  # (key, value)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def setup() -> dict[str, list[Record]]:
    """What must come first, per topic: the pool's policies and the shard job set's first node."""
    return {"policies": [(POOL.encode(), _json(seed_policy())), (POOL.encode(), _json(justice_policy()))],
            "shard-events": [(JOB_SET.encode(), _json({"type": "NodeJoined", "job_set": JOB_SET, "node": "n1",
                                                       "address": "10.0.0.1:9000", "incarnation": 1}))]}


def _policy(i: int) -> dict[str, Any]:
    return {**seed_policy(), "version": f"fuzz-{i}"}


def _registered(i: int) -> dict[str, Any]:
    return {"type": "SchedulerRegistered", "group": GROUP, "scheduler": f"s{i}", "address": f"s{i}:7000",
            "fault_tolerance": 1, "alarm_threshold": 3}


# topic -> (key, i -> a valid value): the i-th valid record of the topic, each yielding an output.
VALID: dict[str, tuple[str, Callable[[int], dict[str, Any] | bytes]]] = {
    "policies": (POOL, _policy),
    "plugin_decider": (POOL, lambda i: envelope(("ats", "hadoop")[i % 2], i % 101, "plugin_decider")),
    "plugin_justice": (POOL, lambda i: envelope("ats", i % 101, "plugin_justice")),
    "cluster-events": (POOL, lambda i: {"type": "PoolCapacitySet", "capacity": 10 + i % 2}),
    "scheduler-events": (GROUP, _registered),
    "job-events": (GROUP, lambda i: {"type": "JobCreated", "group": GROUP, "job": f"j{i}"}),
    "dispatch-commands": (NAMESPACE, lambda i: command("MaxThreadsSet", namespace=NAMESPACE, max=5 + i % 2)),
    "ticks": (NAMESPACE, lambda i: tick(1_000 + i, namespace=NAMESPACE)),
    "shard-events": (JOB_SET, lambda i: {"type": "TaskCountSet", "job_set": JOB_SET, "tasks": 10 + i}),
    "shard-acks": (JOB_SET, lambda i: {"type": "ShardAck", "job_set": JOB_SET, "node": "n1", "epoch": 1}),
}
TOPICS = sorted(VALID)


def valid(topic: str, i: int) -> Record:
    key, make = VALID[topic]
    value = make(i)
    return key.encode(), value if isinstance(value, bytes) else _json(value)


def _object(topic: str, i: int) -> dict[str, Any]:
    """A valid record of `topic` as a JSON object (the envelope for the metric topics)."""
    _, value = valid(topic, i)
    assert value is not None
    result: dict[str, Any] = json.loads(value)
    return result


def _wrong_type(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    field = rng.choice(sorted(obj))
    was = obj[field]
    wrong: Any = [was] if not isinstance(was, list) else {"not": "a list"}
    if isinstance(was, str):
        wrong = rng.choice([[was], {"s": was}, 12.5, None])
    return {**obj, field: wrong}


# topic -> fields a valid record of it must have (its envelope's, for the metric topics)
REQUIRED = {"policies": ("apps",), "plugin_decider": ("Command", "Channel", "Body"),
            "plugin_justice": ("Command", "Channel", "Body"), "cluster-events": ("type", "capacity"),
            "scheduler-events": ("type", "scheduler"), "job-events": ("type", "job"),
            "dispatch-commands": ("type", "max"), "ticks": ("now",), "shard-events": ("type", "tasks"),
            "shard-acks": ("node", "epoch")}


def _missing(topic: str, obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    field = rng.choice(REQUIRED[topic])
    return {k: v for k, v in obj.items() if k != field}


def _huge(topic: str, obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A number no reading accepts: a metrical far outside 0-100, or an integer outside 64 bits."""
    if topic in ("plugin_decider", "plugin_justice"):
        return json.loads(envelope("ats", rng.choice([1e300, -1e300, 10**40]), topic))
    numeric = sorted(f for f, v in obj.items() if isinstance(v, int) and not isinstance(v, bool))
    numeric = numeric or [f for f in REQUIRED[topic] if f != "type"]  # no number: a huge one where text belongs
    return {**obj, rng.choice(numeric): rng.choice([10**40, -(10**40), 2**63, -(2**63) - 1])}


def _unknown(topic: str, obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    if "Command" in obj:
        return {**obj, "Command": rng.choice(["app-kill", "", "APP-METRICAL"])}
    if "type" in obj:
        return {**obj, "type": rng.choice(["Nope", "", "jobcreated"])}
    return {**obj, "kind": rng.choice(["oracle", ""])}


KINDS = ("random_bytes", "truncated_json", "wrong_type", "huge_value", "unknown_command", "invalid_utf8_value",
         "invalid_utf8_key", "missing_field", "empty_value", "not_an_object", "huge_key")


def bad(topic: str, kind: str, rng: random.Random) -> Record:
    """A bad record of `kind` for `topic`."""
    key, value = valid(topic, rng.randrange(1_000))
    assert value is not None
    obj = _object(topic, rng.randrange(1_000))
    if kind == "random_bytes":
        return key, bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64))).replace(b"{", b"(")
    if kind == "truncated_json":
        return key, value[:rng.randrange(1, len(value))]
    if kind == "wrong_type":
        return key, _json(_wrong_type(obj, rng))
    if kind == "huge_value":
        return key, _json(_huge(topic, obj, rng))
    if kind == "unknown_command":
        return key, _json(_unknown(topic, obj, rng))
    if kind == "invalid_utf8_value":
        cut = rng.randrange(1, len(value))
        return key, value[:cut] + b"\xff\xfe" + value[cut:]
    if kind == "invalid_utf8_key":
        return b"\xc3\x28" + (key or b""), value
    if kind == "missing_field":
        return key, _json(_missing(topic, obj, rng))
    if kind == "empty_value":
        return key, None
    if kind == "huge_key":
        return (key or b"") * 10_000, value
    if kind == "not_an_object":
        return key, _json(rng.choice([[obj], "text", 42, None, True]))
    raise ValueError(kind)


def huge_body(topic: str, rng: random.Random) -> Record:
    """A 1 MB record: a valid record whose command or event type is a megabyte of text."""
    key, _ = valid(topic, 0)
    obj = _object(topic, rng.randrange(1_000))
    field = "Command" if "Command" in obj else "type" if "type" in obj else "kind"
    return key, _json({**obj, field: "x" * (HUGE_BODY - len(_json(obj)))})
