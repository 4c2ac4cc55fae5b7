"""An in-memory log of one job set, folded through `shards.apply` as the agent would."""

from __future__ import annotations

import json
from typing import Any

from streams.core import shards
from streams.core.outputs import Emit
from tests.core.fold_log import FoldLog


class ShardLog(FoldLog[shards.ShardState]):
    def __init__(self, job_set: str = "js") -> None:
        super().__init__(job_set, shards.ShardState(), shards.apply)
        self.job_set = job_set

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
        return self.records(shards.SHARD_PLANS)

    @property
    def dead(self) -> list[dict[str, Any]]:
        return self.records("dlq")
