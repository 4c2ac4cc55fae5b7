"""Intake: reading the seed's command envelope, and the pool a record belongs to.

Everything that cannot be read raises `Rejected` with a reason code, which the pool fold turns
into a dead letter, so the decider and justice never see malformed input and a worker never dies
of one record.
"""

from __future__ import annotations

from functools import lru_cache

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
    """Memoised: a pool's metrics repeat (apps x integer scores), and validation is most of a fold's cost."""
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
