"""Shard nodes (SPEC §6, seed 003): the library a scheduler node embeds, its leader, and the ZooKeeper layout.

`ShardNode` registers, follows plans, pauses, runs its tasks and acknowledges epochs; `gate`
holds every condition for running a task; `leader` publishes the live set and holds the pause;
`layout` names the ZooKeeper paths; `check` reads run logs and finds double runs and gaps.
"""

from streams.shards.node import Execution, ShardNode

__all__ = ["Execution", "ShardNode"]
