"""Every fold at the edges of its inputs' schemas (issue 35): whatever records come, valid or not, every output
validates against its own model and every integer in it fits a signed 64-bit integer, so that no consumer (a
Java client, tribunal's own) meets a record it cannot read, and the worker never writes one it cannot encode.

The records are drawn from the exported JSON Schemas themselves (`tests.schemas.drawn`), which puts integers at
their bounds and beyond int64 where a schema sets none, strings empty and non-ASCII, lists at their limits; and
their timestamps at 0, -1 and the largest 64-bit value.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from schemas.common import INT64_MAX, MAX_MILLIS, fits_int64
from schemas.dispatch import MAX_JOBS_PER_ASSIGN, MAX_TIMEOUT_MS
from schemas.export import JSON_DIR, MODELS
from streams import asyncapi
from streams.clients import envelope
from streams.core import dispatch
from streams.core.folds import BY_INPUT, FOLDS
from streams.core.outputs import Emit
from streams.core.source import SourceRecord
from tests.core.pools.builders import seed_policy
from tests.schemas.drawn import values

KEYS = ("k", "é", "")  # the scope names records are drawn with: plain, non-ASCII, and the empty name
BY_NAME: dict[str, type[BaseModel]] = {m.__name__: m for m in MODELS}
TOPICS = {t.name: t for t in asyncapi.TOPICS}
TIMESTAMPS = st.one_of(st.sampled_from([0, -1, 1, MAX_MILLIS, MAX_MILLIS + 1, INT64_MAX]),
                       st.integers(0, MAX_MILLIS))


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((JSON_DIR / f"{name}.json").read_text())
    return schema


SCOPES = ("pool", "group", "namespace", "job_set")


def _scoped(value: Any) -> Any:
    """A drawn record named into one of a few scopes, so that records meet in one state (their key follows)."""
    if isinstance(value, dict):
        for field in SCOPES:
            if isinstance(value.get(field), str):
                value[field] = value[field][:1] if value[field][:1] in KEYS else "k"
    return value


def _records(topic: str) -> st.SearchStrategy[bytes]:
    """Values of `topic` as producers may write them: drawn from its messages' schemas."""
    if topic in ("plugin_decider", "plugin_justice"):  # the seed's envelope carries a JSON body in a string
        apps = st.one_of(st.sampled_from(["ats", "Hadoop"]), st.text(max_size=3))  # the policy's apps, mostly
        body = st.tuples(apps, values(_schema("MetricBody")["properties"]["Metrical"]))
        return body.map(lambda b: envelope(b[0], b[1], topic))
    strategies = [values(_schema(name)) for name in TOPICS[topic].messages]
    if topic == "policies":
        strategies.append(st.just(seed_policy()))  # a policy that stands, so that metrics are decided on
    return st.one_of(strategies).map(_scoped).map(lambda v: json.dumps(v).encode())  # big integers too


@st.composite
def logs(draw: st.DrawFn) -> list[SourceRecord]:
    fold = draw(st.sampled_from(FOLDS))
    first = [SourceRecord("policies", 0, 0, 1, b"k", orjson.dumps(seed_policy()))] if fold.name == "pools" else []
    records = []
    for offset in range(draw(st.integers(1, 12))):
        topic = draw(st.sampled_from(fold.inputs))
        value = draw(_records(topic))
        named = next((v for f, v in json.loads(value).items() if f in SCOPES and isinstance(v, str)), None) \
            if value.startswith(b"{") else None
        key = draw(st.sampled_from([named.encode() if named else b"k", None, "é".encode()]))
        records.append(SourceRecord(topic, 0, offset + 1, draw(TIMESTAMPS), key, value))
    return first + records


def checked(outputs: list[Emit]) -> None:
    """Each output encodes, every integer in it fits 64 bits, and it validates against a model of its topic."""
    for emit in outputs:
        encoded = emit.value_bytes()  # orjson refuses an integer past 64 bits: the worker's write would fail
        decoded = json.loads(encoded)
        assert fits_int64(decoded), decoded
        names = ("DeadLetter",) if emit.stream == "dlq" else TOPICS[emit.stream].messages
        errors = []
        for name in names:
            try:
                BY_NAME[name].model_validate_json(encoded)
                break
            except ValidationError as error:
                errors.append(error)
        else:
            raise AssertionError(f"{emit.stream} record {decoded} fits none of {names}: {errors}")


def fold_all(records: list[SourceRecord]) -> None:
    """Fold `records` as the worker does (`Fold.step`); each is answered: it writes at least one record, and
    every record it writes names it, at its position among its key's inputs (what replay orders by)."""
    states: dict[tuple[str, str], Any] = {}
    for record in records:
        fold = BY_INPUT[record.topic]
        key = (fold.name, fold.key_of(record, record.topic))
        states[key], outputs = fold.step(states.get(key) or fold.empty(), record, record.topic)
        checked(outputs)
        assert outputs, record
        for emit in outputs:
            cause = json.loads(emit.value_bytes())["cause"]
            assert (cause["offset"], cause["position"]) == (record.offset, states[key].applied)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(logs())
def test_every_output_of_every_fold_validates_and_fits_64_bits(records: list[SourceRecord]) -> None:
    fold_all(records)


def _command(value: dict[str, Any], at: int, offset: int) -> SourceRecord:
    topic = dispatch.TICKS if value["type"] == "Tick" else dispatch.DISPATCH_COMMANDS
    return SourceRecord(topic, 0, offset, at, value["namespace"].encode(), orjson.dumps(value))


def test_the_largest_times_and_timeouts_the_schema_allows_start_and_time_out_within_64_bits() -> None:
    jobs = [{"external_id": "é" * 200, "info": "", "max_retries": 1_000, "timeout_ms": MAX_TIMEOUT_MS}] * \
        MAX_JOBS_PER_ASSIGN
    fold_all([
        _command({"type": "MaxThreadsSet", "namespace": "n", "max": INT64_MAX}, 0, 1),
        _command({"type": "WorkerMaxSet", "namespace": "n", "worker": "w", "max": INT64_MAX}, 0, 2),
        _command({"type": "JobsAssigned", "namespace": "n", "worker": "w", "start": MAX_MILLIS, "end": MAX_MILLIS,
                  "jobs": jobs}, INT64_MAX, 3),
        _command({"type": "Tick", "namespace": "n", "now": MAX_MILLIS}, INT64_MAX, 4),
    ])


def test_a_timeout_past_a_year_or_a_time_past_9999_is_dead_lettered_not_decided() -> None:
    for value in ({"type": "JobsAssigned", "namespace": "n", "worker": "w", "start": 0, "end": 0,
                   "jobs": [{"external_id": "x", "timeout_ms": INT64_MAX}]},
                  {"type": "JobsAssigned", "namespace": "n", "worker": "w", "start": MAX_MILLIS + 1,
                   "end": MAX_MILLIS + 1, "jobs": [{"external_id": "x"}]},
                  {"type": "Tick", "namespace": "n", "now": INT64_MAX}):
        record = _command(value, 0, 1)
        _, outputs = dispatch.apply(dispatch.DispatchState(), record, record.topic)
        assert [o.stream for o in outputs] == ["dlq"], outputs
        checked(outputs)
