"""Pieces shared by every record: the strict base model and the cause of an output."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
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
