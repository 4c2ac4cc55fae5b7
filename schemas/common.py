"""Pieces shared by every record: the strict base model and the cause of an output."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_MILLIS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the latest time a record may name, or a clock take


def fits_int64(value: object) -> bool:
    """Whether every integer in `value` (nested in lists and mappings) fits a signed 64-bit integer."""
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    if isinstance(value, dict):
        return all(fits_int64(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(fits_int64(v) for v in value)
    return True  # a nested model checked its own fields


def _number(value: object) -> object:
    if isinstance(value, bool | str | bytes):
        raise ValueError("an integer is a JSON number, not true, false or text")
    return value


NUMBER = BeforeValidator(_number)
"""An integer field's last annotation, after its `Field` (whose bounds then reach the JSON Schema): the integer as
JSON Schema has it, `5` or `5.0`, never `false` or `"5"` (pydantic's lax mode takes both; its strict mode refuses
`5.0`, which the schema allows). What the schema says is what is accepted, from a producer on Kafka and from a
request to the REST API alike."""


class Bounded(BaseModel):
    """A model whose integers are 64-bit: what Java consumers and the JSON encoder read. Python reads
    `1e40` written as digits into an int happily; as input it is bad, not a decision nobody can parse."""

    @model_validator(mode="after")
    def _integers_fit_64_bits(self) -> Self:
        for name, value in self.__dict__.items():
            if not fits_int64(value):
                raise ValueError(f"{name}: an integer outside the signed 64-bit range")
        return self


class Record(Bounded):
    """Base of tribunal's own records: immutable, and unknown fields are an error, not noise."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Cause(Record):
    """The input record an output was derived from: where auditors and deduplication start."""

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    timestamp: int = Field(description="The input record's timestamp, milliseconds since the epoch")
    position: int | None = Field(None, ge=1, description=(
        "The input's place among all inputs applied for its key (pool or group), 1, 2, ...: the worker "
        "reads several topics in arrival order, and replay applies a key's inputs in this order"))
