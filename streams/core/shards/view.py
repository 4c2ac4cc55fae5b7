"""What operators read of a job set: its plan, and why each node owns what it owns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.shards import plans
from streams.core.shards.fold import ShardState


def describe(job_set: str, state: ShardState) -> dict[str, Any]:
    plan = state.plan or {}
    return {"job_set": job_set, "epoch": state.epoch, "strategy": state.strategy, "tasks": state.tasks,
            "nodes": dict(state.nodes), "incarnations": dict(state.incarnations), "newest_registration": state.newest,
            "ranges": plan.get("ranges", {}),
            "awaiting": plan.get("awaiting", []),
            "released": plan.get("released", True), "change": plan.get("change", ""),
            "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items()))}


def rule(strategy: str, nodes: Mapping[str, str], tasks: int) -> list[str]:
    """The strategy's arithmetic for this live set, in words: why each node owns its ranges."""
    if not nodes:
        return ["no live node: nothing is owned"]
    if strategy == "ring":
        return [f"ring: each node hashes to {plans.POINTS} places on a 2^64 ring, task t sits at (t-1)*2^64//{tasks}; "
                "a task belongs to the first node place at or after it (moves on a join only to the new node)"]
    order = sorted(nodes, key=lambda node: (nodes[node], node))
    avg = tasks // len(order)
    lines = [f"scope: {len(order)} live node(s) sorted by address, avg = {tasks} // {len(order)} = {avg}; "
             f"node k owns k*{avg}+1 .. (k+1)*{avg}, the last up to {tasks}"]
    for k, node in enumerate(order):
        first, last = k * avg + 1, tasks if k == len(order) - 1 else (k + 1) * avg
        owned = f"{first}-{last}" if first <= last else "nothing"
        lines.append(f"  k={k} {node} ({nodes[node]}): {owned}")
    return lines


def explain(before: ShardState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    for output in outputs:
        if output["type"] == "ShardPlan":
            new = output["epoch"] != before.epoch
            return {"plan": {**{k: output[k] for k in ("epoch", "strategy", "tasks", "nodes", "ranges", "moved",
                                                       "change", "awaiting", "released", "paused_ms")},
                             "new_epoch": new, "rule": rule(output["strategy"], output["nodes"], output["tasks"])}}
    return {}


def render(found: Mapping[str, Any]) -> list[str]:
    p = found.get("plan")
    if p is None:
        return [f"result  nothing changed (epoch {found['after']['epoch']}): the live set, task count and strategy "
                "were already so, or the acknowledgement was not awaited"]
    if not p["new_epoch"]:
        state = "released: new owners may start" if p["released"] else f"awaiting {', '.join(p['awaiting'])}"
        return [f"ack     epoch {p['epoch']}: {state}"
                + (f" (paused {p['paused_ms']} ms)" if p["released"] and p["paused_ms"] is not None else "")]
    lines = [f"epoch   {found['before']['epoch']} -> {p['epoch']} ({p['change']}), strategy {p['strategy']}, "
             f"{p['tasks']} tasks, {p['moved']} moved", *(f"rule    {line}" for line in p["rule"])]
    for node, spans in p["ranges"].items():
        owned = ", ".join(f"{a}-{b}" for a, b in spans) or "nothing"
        lines.append(f"owns    {node}: {owned}")
    lines.append("awaits  " + (", ".join(p["awaiting"]) or "nobody: released at once"))
    return lines
