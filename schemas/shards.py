"""Shard plans (SPEC §6, seed 003): membership on `shard-events`, acknowledgements on `shard-acks`, and plans.

Every record is keyed by its job set. Node ids and job set names become ZooKeeper path segments,
so they may not contain `/`. A plan names its strategy: `scope` is the seed's (live nodes sorted
by address, `avg = T // L` tasks each, the last node up to T); `ring` is consistent hashing of
the task line, which on a join moves only the tasks the new node takes (about T/(L+1)).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import Cause, Record

PathName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^/\s]+$")]
Strategy = Literal["scope", "ring"]
MAX_TASKS = 100_000_000
Address = Annotated[str, Field(max_length=300)]
Incarnation = Annotated[int, Field(ge=0, description="the czxid of the node's /live entry: a node that lost its "
                                   "session and registered again is a new incarnation (0: not said)")]


class NodeJoined(Record):
    """A node's ephemeral `/live/{node}` appeared, holding its address."""

    type: Literal["NodeJoined"] = "NodeJoined"
    job_set: PathName
    node: PathName
    address: Address
    incarnation: Incarnation = 0


class NodeLost(Record):
    """A node's `/live/{node}` is gone: its ZooKeeper session expired or it left."""

    type: Literal["NodeLost"] = "NodeLost"
    job_set: PathName
    node: PathName
    incarnation: int = Field(0, ge=0, description="the incarnation that was lost: a loss of an earlier one than the "
                             "live one is stale and changes nothing (0: whichever is live)")


class TaskCountSet(Record):
    """How many tasks (1..tasks) the job set has, and optionally the strategy that splits them."""

    type: Literal["TaskCountSet"] = "TaskCountSet"
    job_set: PathName
    tasks: int = Field(ge=0, le=MAX_TASKS)
    strategy: Strategy | None = Field(None, description="None: keep the job set's strategy (scope at first)")


class LiveNode(Record):
    node: PathName
    address: Address
    incarnation: Incarnation = 0


class NodesSnapshot(Record):
    """Every live node ZooKeeper holds for the job set at one moment; the fold's live set is made to match it."""

    type: Literal["NodesSnapshot"] = "NodesSnapshot"
    job_set: PathName
    nodes: list[LiveNode]
    zxid: int = Field(0, ge=0, description="`/live`'s pzxid when read: a snapshot older than a registration the "
                      "fold knows of is stale and changes nothing (0: not said)")


class ShardAck(Record):
    """`node` has stopped every task outside its range in `epoch` (revoke before grant)."""

    type: Literal["ShardAck"] = "ShardAck"
    job_set: PathName
    node: PathName
    epoch: int = Field(ge=1)


ShardEvent = Annotated[NodeJoined | NodeLost | TaskCountSet | NodesSnapshot, Field(discriminator="type")]


class ShardPlan(Record):
    """The plan of one epoch: published when the live set, the task count or the strategy changes, and again as
    each awaited node acknowledges it; `released` once none is awaited, when new owners may start."""

    type: Literal["ShardPlan"] = "ShardPlan"
    job_set: str
    epoch: int = Field(ge=1)
    strategy: Strategy
    tasks: int
    nodes: dict[str, str] = Field(description="live node -> address")
    incarnations: dict[str, int] = Field(description="live node -> the incarnation this plan is for: a node acts "
                                         "only on plans naming its own")
    ranges: dict[str, list[tuple[int, int]]] = Field(description="node -> its task ranges [first, last], "
                                                     "inclusive, ascending; together they cover 1..tasks once")
    moved: int = Field(description="tasks whose owner differs from the previous epoch's")
    change: str = Field(description="what made this epoch, in words")
    joined: list[str]
    lost: list[str]
    awaiting: list[str] = Field(description="nodes whose acknowledgement of this epoch is still awaited")
    released: bool
    published_at: int = Field(description="timestamp (ms) of the input that made this epoch")
    paused_ms: int | None = Field(None, description="on release: from the epoch's input to the last "
                                  "acknowledgement, by the inputs' timestamps")
    cause: Cause
    seq: int = Field(ge=1)
