"""Turning a rejected input record into its dead-letter record."""

from __future__ import annotations

import base64
from typing import Protocol, Self, TypeVar

from schemas.records import DeadLetter
from streams.core.outputs import DLQ, Emit
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


def dlq_topic(topic: str) -> str:
    return f"{topic}.dlq"


def dead_letter(record: SourceRecord, key: str, seq: int, rejection: Rejected, position: int) -> DeadLetter:
    return DeadLetter(
        key=key, seq=seq, cause=record.cause(position), reason_code=rejection.code, reason=rejection.reason,
        original_key_b64=_b64(record.key), original_value_b64=_b64(record.value),
        original_value=_text(record.value),
    )


class Numbered(Protocol):
    """A fold's state as far as dead letters need it: per-stream seqs, and the inputs applied so far."""

    @property
    def applied(self) -> int: ...

    def next_seq(self, stream: str) -> tuple[Self, int]: ...


S = TypeVar("S", bound=Numbered)


def rejected(state: S, record: SourceRecord, rejection: Rejected, key: str) -> tuple[S, list[Emit]]:
    """The dead letter for an admitted `record` of `key` (the fold's `key_of`), numbered per key and source topic."""
    numbered, seq = state.next_seq(f"{DLQ}:{record.topic}")
    return numbered, [Emit(DLQ, key, dead_letter(record, key, seq, rejection, numbered.applied))]
