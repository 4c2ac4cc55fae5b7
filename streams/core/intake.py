"""Intake: reading the seed's command envelope, and the pool a record belongs to.

Everything that cannot be read raises `Rejected` with a reason code, which the pool fold turns
into a dead letter, so the decider and justice never see malformed input and a worker never dies
of one record.
"""

from __future__ import annotations

from functools import lru_cache

import orjson
from pydantic import ValidationError

from schemas.envelope import CommandEnvelope, MetricBody
from streams.core.deadletter import Rejected
from streams.core.source import MAX_KEY_BYTES, UNREADABLE_KEY, SourceRecord, record_key

METRIC_COMMAND = "app-metrical"


def error_text(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in error.errors()
    )


def readable(record: SourceRecord, key: str | None = None) -> bytes:
    """The record's value, or `Rejected` when its key (`record_key`, if not given) cannot name a pool or
    it has no value."""
    if (record_key(record) if key is None else key) == UNREADABLE_KEY:
        raise Rejected("bad_key", f"record key is not UTF-8 text of at most {MAX_KEY_BYTES} bytes "
                                  "(the key names the pool)")
    if record.value is None:
        raise Rejected("empty_value", "record has no value")
    return record.value


def parse(record: SourceRecord, channel: str, key: str | None = None) -> tuple[str, float]:
    """The (app, metrical) a record carries, or `Rejected` saying exactly what is wrong (`key`: its
    `record_key`, if the caller has it)."""
    return _metric(readable(record, key), channel)


@lru_cache(maxsize=1 << 16)
def _metric(value: bytes, channel: str) -> tuple[str, float]:
    """Memoised: a pool's metrics repeat (apps x integer scores), and validation is most of a fold's cost.

    A well-formed metric is read by `_plain`; anything else goes through the models, which accept what they
    accept (a Metrical given as a string, say) and word the rejection."""
    plain = _plain(value, channel)
    if plain is not None:
        return plain
    try:
        envelope = CommandEnvelope.model_validate_json(value)
    except ValidationError as e:
        raise Rejected("bad_envelope", f"not a command envelope: {error_text(e)}") from None
    if envelope.Command != METRIC_COMMAND:
        raise Rejected("unknown_command", f"unknown Command {envelope.Command!r}; expected {METRIC_COMMAND!r}")
    if envelope.Channel != channel:
        raise Rejected("wrong_channel", f"Channel {envelope.Channel!r} arrived on {channel!r}")
    try:
        body = MetricBody.model_validate_json(envelope.Body)
    except ValidationError as e:
        if any(err["type"] == "json_invalid" for err in e.errors()):
            raise Rejected("bad_body", f"Body is not JSON: {envelope.Body[:80]!r}") from None
        raise Rejected("bad_metric", f"invalid metric body: {error_text(e)}") from None
    return body.App, body.Metrical


def _plain(value: bytes, channel: str) -> tuple[str, float] | None:
    """The (app, metrical) of a metric exactly as the seed's producers write it, read without the models (a
    large pool's metrics seldom repeat, so the cache above misses): None for anything else, which the models
    then read. What this accepts, the models accept with the same result (a property test holds it)."""
    try:
        envelope = orjson.loads(value)
        if not isinstance(envelope, dict):
            return None
        body_text = envelope.get("Body")
        if envelope.get("Command") != METRIC_COMMAND or envelope.get("Channel") != channel \
                or not isinstance(body_text, str):
            return None
        body = orjson.loads(body_text)
        if not isinstance(body, dict):
            return None
        app, metrical = body.get("App"), body.get("Metrical")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(app, str) or not app or isinstance(metrical, bool) or not isinstance(metrical, int | float):
        return None
    number = float(metrical)
    return (app, number) if 0 <= number <= 100 else None
