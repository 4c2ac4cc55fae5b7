"""A scheduler group as an operator reads it (`tribunal groups state --group`, `explain`, `report`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.groups.emission import limit_stream
from streams.core.groups.offers import offers
from streams.core.groups.state import GroupState


def gauges(state: GroupState) -> dict[str, float]:
    """The group's jobs (K) and how many its online schedulers may hold in all (the sum of N): fewer than K
    leaves jobs unowned."""
    return {"tribunal_group_jobs": float(state.K), "tribunal_group_job_capacity": float(state.sum_N())}


def describe(group_id: str, state: GroupState) -> dict[str, Any]:
    """Each scheduler's figures, the orphans and the offers."""
    return {"group": group_id, "K": state.K, "S": state.S, "sum_N": state.sum_N(),
            "schedulers": {sid: state.figures_of(sid)._asdict() for sid in sorted(state.members)},
            "orphans": sorted(state.orphans), "offers": offers(state),
            "seqs": dict(sorted({**state.seqs, **{limit_stream(group_id, sid): seq
                                                  for sid, seq in state.limit_seqs.items()}}.items())),
            "offsets": dict(sorted(state.offsets.items()))}


def explain(before: GroupState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the event did to the group, as its `GroupHealth` record says: what `explain` shows."""
    for output in outputs:
        if output["type"] == "GroupHealth":
            return {"group": {k: output[k] for k in ("event", "applied", "note", "K", "S", "sum_N", "capacity_ok",
                                                     "orphans", "offers", "corrections")}}
    return {}



def render(found: Mapping[str, Any]) -> list[str]:
    """`explain`'s text for a group record: the event, K, S and sum of N, corrections, changed figures."""
    g = found.get("group")
    if g is None:
        return []
    before, after = found["before"], found["after"]
    lines = [f"event   {g['event']}: {g['note']}" + ("" if g["applied"] else " (changed nothing)"),
             f"before  K={before['K']} S={before['S']} sum N={before['sum_N']}",
             f"after   K={g['K']} S={g['S']} sum N={g['sum_N']} capacity {'ok' if g['capacity_ok'] else 'SHORT'}"]
    for c in g["corrections"]:
        lines.append(f"  fix   {c['event']['type']} {c['event'].get('scheduler') or c['event'].get('job')}: "
                     f"{c['why']}")
    for sid, figures in after["schedulers"].items():
        if before["schedulers"].get(sid) != figures:
            lines.append(f"  {sid:<10} " + " ".join(f"{k}={figures[k]}" for k in ("n", "N", "X", "M"))
                         + "".join(f" {k}" for k in ("refuse", "alarm", "offline", "drained") if figures[k]))
    if g["orphans"]:
        lines.append(f"orphans {', '.join(g['orphans'])}; offers {g['offers']}")
    return lines
