"""What a fold emits: a record for a logical stream, keyed by its scope.

Streams are named logically (`app-metricals`, `dlq`); the shell maps them to real topic names
(with the deployment's prefix, or `<input topic>.dlq`), so the core never knows where it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.common import Record

DLQ = "dlq"


@dataclass(frozen=True, slots=True)
class Emit:
    stream: str
    key: str
    record: Record

    def value_bytes(self) -> bytes:
        """The canonical encoding: the same record always gives the same bytes."""
        return self.record.model_dump_json(by_alias=True).encode("utf-8")
