"""What a fold emits: a record for a logical stream, keyed by its scope.

Streams are named logically (`scaling-decisions`, `dlq`); the shell maps them to real topic
names (with the deployment's prefix, or `<input topic>.dlq`), so the core never knows where it
runs. A record is a pydantic model, or, on the hot paths, a plain mapping laid out in the field
order of its model in `schemas/` (tests validate every such output against its model). Records
built once per input are named tuples, not frozen dataclasses: as immutable, and built in a third
of the time (a frozen dataclass sets each field through `object.__setattr__`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from schemas.common import Record

DLQ = "dlq"
SILENT_INPUTS = "silent-inputs"  # every fold's answer to an input it applied that wrote nothing else


def dlq_topic(topic: str) -> str:
    return f"{topic}.dlq"


def topic_of(stream: str, source_topic: str, prefix: str) -> str:
    """The topic an output of logical `stream` is written to: the deployment's name for it, or the dead-letter
    topic of the input it came from. Live and replayed outputs are named here, the same way."""
    return dlq_topic(source_topic) if stream == DLQ else prefix + stream


class Emit(NamedTuple):
    stream: str
    key: str
    record: Record | Mapping[str, Any]

    def value_bytes(self) -> bytes:
        """The canonical encoding: compact UTF-8 JSON, fields in model order; same record, same bytes."""
        record = self.record
        if type(record) is dict:  # the hot paths' records: checked first, as a pydantic isinstance is slower
            return orjson.dumps(record)
        if isinstance(record, Record):
            return orjson.dumps(record.model_dump(mode="json", by_alias=True))
        return orjson.dumps(record)
