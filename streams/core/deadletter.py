"""Turning a rejected input record into its dead-letter record."""

from __future__ import annotations

import base64

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


def dead_letter(record: SourceRecord, key: str, seq: int, rejection: Rejected, position: int) -> DeadLetter:
    return DeadLetter(
        key=key, seq=seq, cause=record.cause(position), reason_code=rejection.code, reason=rejection.reason,
        original_key_b64=_b64(record.key), original_value_b64=_b64(record.value),
        original_value=_text(record.value),
    )
