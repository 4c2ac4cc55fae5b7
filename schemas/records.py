"""Records tribunal writes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import Cause, Record


class DeadLetter(Record):
    """An input record that failed validation, kept whole on `<topic>.dlq` with the reason.

    The original bytes are carried as base64 and as text (when they are UTF-8), so an operator can
    read them and a tool can re-publish them unchanged; a record too large for that is read at its
    cause instead (`kept` false).
    """

    type: Literal["DeadLetter"] = "DeadLetter"
    key: str = Field(description="The pool the record was addressed to, as far as it could be read")
    seq: int = Field(ge=1, description="1, 2, ... per key on this dead-letter topic")
    cause: Cause
    reason_code: str
    reason: str
    original_key_b64: str | None
    original_value_b64: str | None
    original_value: str | None = Field(description="The original value decoded as UTF-8, if it is")
    original_bytes: int | None = Field(None, ge=0, description="The original value's size in bytes")
    kept: bool = Field(True, description=(
        "False when the original was too large to carry (a dead letter must fit in one Kafka record): "
        "then the value's size is here (and the key, if it is small), and the record itself is at its cause"))
