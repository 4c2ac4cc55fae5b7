"""Where a job set lives in ZooKeeper (seed 003's layout), under a configurable root.

    {root}/{job_set}/live/{node}       ephemeral: the node's address; the children are the live set
    {root}/{job_set}/live              its data: the current plan (JSON), for tools that read ZooKeeper
    {root}/{job_set}/all/{node}        persistent: every node that ever joined, with its address
    {root}/{job_set}/election/leader   ephemeral: the leader's address (whoever creates it leads)
    {root}/{job_set}/shard             ephemeral, the leader's, present while a plan changes: nobody schedules

The default root sits under the scheduler groups' root as `.shards`: the bridge ignores names
starting with a dot, so a job set is never taken for a scheduler group.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SHARD_ROOT = "/tribunal/.shards"


@dataclass(frozen=True)
class ShardLayout:
    job_set: str
    root: str = DEFAULT_SHARD_ROOT

    @property
    def base(self) -> str:
        return f"{self.root}/{self.job_set}"

    @property
    def live(self) -> str:
        return f"{self.base}/live"

    @property
    def all(self) -> str:
        return f"{self.base}/all"

    @property
    def election(self) -> str:
        return f"{self.base}/election"

    @property
    def leader(self) -> str:
        return f"{self.base}/election/leader"

    @property
    def shard(self) -> str:
        return f"{self.base}/shard"

    def live_node(self, node: str) -> str:
        return f"{self.live}/{node}"

    def all_node(self, node: str) -> str:
        return f"{self.all}/{node}"
