"""An in-memory log of one job set, folded through `shards.apply` as the agent would."""

from __future__ import annotations

import json
from typing import Any

from streams.core import shards
from streams.core.outputs import Emit
from streams.core.source import SourceRecord


class ShardLog:
    def __init__(self, job_set: str = "js") -> None:
        self.job_set = job_set
        self.state = shards.ShardState()
        self.offsets: dict[str, int] = {}
        self.emitted: list[Emit] = []

    def raw(self, topic: str, value: bytes, key: bytes | None = None, at: int | None = None) -> list[Emit]:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        record = SourceRecord(topic, 0, offset, at if at is not None else 1_732_200_000_000 + 10 * offset,
                              self.job_set.encode() if key is None else key, value)
        self.state, outputs = shards.apply(self.state, record, topic)
        self.emitted.extend(outputs)
        return outputs

    def send(self, type_: str, at: int | None = None, **fields: Any) -> list[Emit]:
        topic = shards.SHARD_ACKS if type_ == "ShardAck" else shards.SHARD_EVENTS
        return self.raw(topic, json.dumps({"type": type_, "job_set": self.job_set, **fields}).encode(), at=at)

    def join(self, node: str, address: str | None = None) -> list[Emit]:
        return self.send("NodeJoined", node=node, address=address or f"10.0.0.{node}:9000")

    def ack_all(self) -> None:
        plan = self.state.plan
        assert plan is not None
        for node in list(plan["awaiting"]):
            self.send("ShardAck", node=node, epoch=plan["epoch"])

    @property
    def plans(self) -> list[dict[str, Any]]:
        return [dict(e.record) for e in self.emitted if e.stream == shards.SHARD_PLANS]

    @property
    def dead(self) -> list[dict[str, Any]]:
        return [dict(e.record) if isinstance(e.record, dict) else e.record.model_dump() for e in self.emitted
                if e.stream == "dlq"]
