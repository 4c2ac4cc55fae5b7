"""What a fold emits: a record for a logical stream, keyed by its scope.

Streams are named logically (`scaling-decisions`, `dlq`); the shell maps them to real topic
names (with the deployment's prefix, or `<input topic>.dlq`), so the core never knows where it
runs. A record is a pydantic model, or, on the hot paths, a plain mapping laid out in the field
order of its model in `schemas/` (tests validate every such output against its model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from schemas.common import Record

DLQ = "dlq"


@dataclass(frozen=True, slots=True)
class Emit:
    stream: str
    key: str
    record: Record | Mapping[str, Any]

    def value_bytes(self) -> bytes:
        """The canonical encoding: compact UTF-8 JSON, fields in model order; same record, same bytes."""
        if isinstance(self.record, Record):
            return orjson.dumps(self.record.model_dump(mode="json", by_alias=True))
        return orjson.dumps(self.record)
