"""What a fold emits: a record for a logical stream, keyed by its scope.

Streams are named logically (`scaling-decisions`, `dlq`); the shell maps them to real topic
names (with the deployment's prefix, or `<input topic>.dlq`), so the core never knows where it
runs. A record is a pydantic model, or, on the hot paths, a plain mapping laid out in the field
order of its model in `schemas/` (tests validate every such output against its model). Records
built once per input are native classes with `Final` attributes (compiled by mypyc, a C call to
build, where a named tuple's `__new__` stays a Python function), or named tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, final

import orjson

from schemas.common import Record
from streams.core.frozen import Frozen

DLQ = "dlq"
SILENT_INPUTS = "silent-inputs"  # every fold's answer to an input it applied that wrote nothing else


def dlq_topic(topic: str) -> str:
    return f"{topic}.dlq"


def topic_of(stream: str, source_topic: str, prefix: str) -> str:
    """The topic an output of logical `stream` is written to: the deployment's name for it, or the dead-letter
    topic of the input it came from. Live and replayed outputs are named here, the same way."""
    return dlq_topic(source_topic) if stream == DLQ else prefix + stream


@final
class Emit(Frozen):
    """One output record; a native class (built once or twice per input: see `streams.core.pools.verdicts`)."""

    __slots__ = ("key", "record", "stream")

    def __init__(self, stream: str, key: str, record: Record | Mapping[str, Any]) -> None:
        self.stream: Final = stream
        self.key: Final = key
        self.record: Final = record

    def _fields(self) -> tuple[object, ...]:
        return (self.stream, self.key, self.record)

    def value_bytes(self) -> bytes:
        """The canonical encoding: compact UTF-8 JSON, fields in model order; same record, same bytes."""
        record = self.record
        if type(record) is dict:  # the hot paths' records: checked first, as a pydantic isinstance is slower
            return orjson.dumps(record)
        if isinstance(record, Record):
            return orjson.dumps(record.model_dump(mode="json", by_alias=True))
        return orjson.dumps(record)
