"""Turning a rejected input record into its dead-letter record."""

from __future__ import annotations

import base64

import orjson

from schemas.records import DeadLetter
from streams.core.source import SourceRecord


class Rejected(Exception):
    """Raised inside a fold's validation to send the current record to the dead-letter topic."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


REASON_CHARS = 1_000  # a reason quotes what it rejects: a megabyte of it says no more than its start
KEPT_BYTES = 256 * 1024  # the most a dead letter spends on its original, encoded: well inside one Kafka record


def _shortened(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else f"{reason[:REASON_CHARS]}... ({len(reason)} characters)"


def dead_letter(record: SourceRecord, key: str, seq: int, rejection: Rejected, position: int) -> DeadLetter:
    """The dead letter of `record`: with its original bytes (as base64, and as text when they are UTF-8)
    while they fit in `KEPT_BYTES`; the text goes first, then the bytes (a 1 MB record rejected must not
    make a dead letter the broker refuses, which would stop the worker at that record)."""
    key_b64, value_b64, text = _b64(record.key), _b64(record.value), _text(record.value)
    carried = len(key_b64 or "") + len(value_b64 or "")
    if text is not None and carried + len(orjson.dumps(text)) > KEPT_BYTES:
        text = None
    kept = carried <= KEPT_BYTES
    return DeadLetter(
        key=key, seq=seq, cause=record.cause(position), reason_code=rejection.code, reason=_shortened(rejection.reason),
        original_key_b64=key_b64 if kept or len(key_b64 or "") <= KEPT_BYTES // 4 else None,
        original_value_b64=value_b64 if kept else None,
        original_value=text, original_bytes=None if record.value is None else len(record.value), kept=kept,
    )
