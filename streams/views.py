"""A pool or a scheduler group as an operator reads it: for `tribunal state`, `explain` and `report`."""

from __future__ import annotations

from typing import Any

from streams.core import limits, pool


def describe(pool_id: str, state: pool.PoolState) -> dict[str, Any]:
    """What `tribunal state` shows: a pool as an operator reads it."""
    out: dict[str, Any] = {"pool": pool_id, "seqs": dict(state.seqs), "offsets": dict(state.offsets)}
    if state.decider is not None:
        d = state.decider
        out["decider"] = {
            "policy_version": d.policy.version, "capacity": d.capacity, "free": d.free,
            "apps": [{"app": r.name, "priority": r.priority, "min": r.min_num, "max": r.max_num,
                      "instances": d.instances[r.key], "metrical": d.metricals[r.key],
                      "idle": r.key in d.idle} for r in d.policy.rules]}
    if state.justice is not None:
        j = state.justice
        out["justice"] = {"policy_version": j.policy.version, "driver": j.policy.driver,
                          "targets": {j.policy.apps[k]: v for k, v in j.targets.items()}}
    return out


def describe_group(group_id: str, state: limits.GroupState) -> dict[str, Any]:
    """What `tribunal state --group` shows: each scheduler's figures, the orphans and the offers."""
    names = ("live", "n", "N", "X", "M", "refuse", "alarm", "offline", "drained")
    return {"group": group_id, "K": state.K, "S": state.S, "sum_N": state.sum_N(),
            "schedulers": {sid: dict(zip(names, state.figures_of(sid), strict=True)) for sid in sorted(state.members)},
            "orphans": sorted(state.orphans), "offers": limits.offers(state),
            "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items()))}
