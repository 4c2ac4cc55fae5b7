"""Pools (SPEC §2, §3): the fold of a pool's policies, cluster events and load reports.

`fold` (the entry point), `decider` (who grows, who gives way), `justice` (one driver app's
split), `ranges` (where a metrical falls), `codec` (the table entries), `view` (what operators read).
"""

from streams.core.pools.fold import (
    CLUSTER_EVENTS,
    INPUTS,
    JUSTICE_OUTCOMES,
    KEYED,
    OUTPUTS,
    PLUGIN_DECIDER,
    PLUGIN_JUSTICE,
    POLICIES,
    POOL_INSTANCES,
    SCALING_DECISIONS,
    PoolState,
    apply,
    key_of,
    self_contained,
)

__all__ = ["CLUSTER_EVENTS", "INPUTS", "JUSTICE_OUTCOMES", "KEYED", "OUTPUTS", "PLUGIN_DECIDER", "PLUGIN_JUSTICE",
           "POLICIES", "POOL_INSTANCES", "SCALING_DECISIONS", "PoolState", "apply", "key_of", "self_contained"]
