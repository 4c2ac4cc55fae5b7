"""Intake: the seed's command envelope, validated and numbered per pool.

The first fold of the pipeline. It turns raw bytes from `plugin_decider` / `plugin_justice` into
`AppMetrical` records, and everything it cannot read into dead letters, so the later folds never
see malformed input and a worker never dies of one record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import ValidationError

from schemas.envelope import CommandEnvelope, MetricBody
from schemas.records import AppMetrical
from streams.core.deadletter import Rejected, dead_letter
from streams.core.outputs import DLQ, Emit
from streams.core.source import DEFAULT_POOL, SourceRecord

APP_METRICALS = "app-metricals"
METRIC_COMMAND = "app-metrical"
UNREADABLE_KEY = "<unreadable-key>"


@dataclass(frozen=True, slots=True)
class IntakeState:
    """Per pool: the last sequence numbers handed out, and the last input offset applied."""

    metrics_seq: int = 0
    dead_seq: int = 0
    last_offset: int = -1


def pool_of(record: SourceRecord) -> str:
    """The pool a record belongs to: its key, or `default` when it has none (SPEC §1)."""
    if not record.key:
        return DEFAULT_POOL
    try:
        return record.key.decode("utf-8")
    except UnicodeDecodeError:
        return UNREADABLE_KEY


def error_text(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in error.errors()
    )


def parse(record: SourceRecord, channel: str) -> tuple[str, float]:
    """The (app, metrical) a record carries, or `Rejected` saying exactly what is wrong."""
    if pool_of(record) == UNREADABLE_KEY:
        raise Rejected("bad_key", "record key is not UTF-8 text (the key names the pool)")
    if record.value is None:
        raise Rejected("empty_value", "record has no value")
    try:
        envelope = CommandEnvelope.model_validate_json(record.value)
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


def apply(state: IntakeState, record: SourceRecord, channel: str) -> tuple[IntakeState, list[Emit]]:
    """Validate one record of `channel`; emit an `AppMetrical` or a dead letter, never both.

    A record at or below `last_offset` was applied already (a redelivery after a crash), so it
    yields nothing: the fold is idempotent by input offset.
    """
    if record.offset <= state.last_offset:
        return state, []
    pool = pool_of(record)
    try:
        app, metrical = parse(record, channel)
    except Rejected as rejection:
        return reject(state, record, rejection)
    seq = state.metrics_seq + 1
    out = AppMetrical(pool=pool, seq=seq, cause=record.cause, channel=channel, app=app, metrical=metrical)
    return replace(state, metrics_seq=seq, last_offset=record.offset), [Emit(APP_METRICALS, pool, out)]


def reject(state: IntakeState, record: SourceRecord, rejection: Rejected) -> tuple[IntakeState, list[Emit]]:
    """Send `record` to the dead-letter stream; the shell also uses this for unexpected errors."""
    pool = pool_of(record)
    seq = state.dead_seq + 1
    letter = dead_letter(record, pool, seq, rejection)
    return replace(state, dead_seq=seq, last_offset=record.offset), [Emit(DLQ, pool, letter)]
