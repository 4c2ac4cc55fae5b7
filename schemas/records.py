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


class SilentInput(Record):
    """An input a fold applied that wrote nothing else (a stale acknowledgement, a Tick at or before its
    namespace's clock, a snapshot that says what the log said already), on `silent-inputs`.

    Every applied input thus leaves a record naming its `cause.position` among its key's inputs, so
    `replay --from-kafka` places each input exactly where the worker applied it, whatever the arrival order
    was; an input that writes nothing at one place may write something at another.
    """

    type: Literal["SilentInput"] = "SilentInput"
    fold: str = Field(description="The fold that applied it: pools, groups, dispatch or shards")
    key: str = Field(description="The key whose state it was applied to (a pool, group, namespace or job set)")
    seq: int = Field(ge=1, description="1, 2, ... per fold and key (the record's key is `fold/key`)")
    cause: Cause
