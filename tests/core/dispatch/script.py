"""Build dispatcher input records and fold scripts of them (the dispatcher's core and live tests)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from streams.core import dispatch
from streams.core.dispatch import DispatchState
from streams.core.outputs import Emit
from streams.core.source import SourceRecord

NS = "ns1"


def assign(worker: str, start: int, end: int, n: int, max_retries: int = 0, timeout_ms: int = 1_000,
           namespace: str = NS) -> dict[str, Any]:
    return {"type": "JobsAssigned", "namespace": namespace, "worker": worker, "start": start, "end": end,
            "jobs": [{"external_id": f"{worker}-{i}", "info": "", "max_retries": max_retries,
                      "timeout_ms": timeout_ms} for i in range(n)]}


def tick(now: int, namespace: str = NS) -> dict[str, Any]:
    return {"type": "Tick", "namespace": namespace, "now": now}


def command(kind: str, namespace: str = NS, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "namespace": namespace, **fields}


class Script:
    """Folds commands and ticks one by one, as the worker would, keeping every output."""

    def __init__(self, state: DispatchState | None = None) -> None:
        self.state = state or DispatchState()
        self.offsets: dict[str, int] = {}  # topic -> the last offset given (one partition a topic)
        self.clock = 0  # the broker's: each Tick's `now` is when it was appended, and a command the time of the
        # last Tick before it (a ticker in step with the broker); `at` dates a record otherwise
        self.outputs: list[Emit] = []

    def record(self, value: dict[str, Any] | bytes, key: str | None = NS,
               at: int | None = None) -> tuple[SourceRecord, str]:
        is_tick = isinstance(value, dict) and value.get("type") == "Tick"
        topic = dispatch.TICKS if is_tick else dispatch.DISPATCH_COMMANDS
        body = value if isinstance(value, bytes) else json.dumps(value).encode()
        offset = self.offsets[topic] = self.offsets.get(topic, 0) + 1
        if at is None and is_tick and isinstance(value, dict) and isinstance(value.get("now"), int):
            at = value["now"]
        timestamp = self.clock if at is None else at
        self.clock = max(self.clock, timestamp)
        return SourceRecord(topic, 0, offset, timestamp, key.encode() if key else None, body), topic

    def feed(self, value: dict[str, Any] | bytes, key: str | None = NS, at: int | None = None) -> list[dict[str, Any]]:
        record, topic = self.record(value, key, at)
        self.state, outputs = dispatch.apply(self.state, record, topic)
        self.outputs.extend(outputs)
        return [dict(o.record) for o in outputs]

    def feed_all(self, values: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for v in values for o in self.feed(v)]

    def seqs(self, stream: str) -> list[int]:
        """The `seq` of each output on `stream`, in order (a dead letter is a model, the others mappings)."""
        return [o.record["seq"] if isinstance(o.record, dict) else o.record.seq
                for o in self.outputs if o.stream == stream]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [dict(o.record) for o in self.outputs if dict(o.record).get("type") == kind]
