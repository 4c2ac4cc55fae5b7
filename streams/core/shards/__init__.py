"""Shard plans (SPEC §6, seed 003): which live node owns which tasks of a job set, epoch by epoch.

`plans` (the strategies and comparing plans), `fold` (the entry point, the state and its table
entry), `view` (what operators read).
"""

from streams.core.shards.fold import (
    INPUTS,
    OUTPUTS,
    SHARD_ACKS,
    SHARD_EVENTS,
    SHARD_PLANS,
    ShardState,
    apply,
    dump,
    key_of,
    load,
)

__all__ = ["INPUTS", "OUTPUTS", "SHARD_ACKS", "SHARD_EVENTS", "SHARD_PLANS", "ShardState", "apply", "dump", "key_of",
           "load"]
