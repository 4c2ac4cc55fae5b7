"""A scheduler group as an operator reads it (`tribunal state --group`, `explain`, `report`)."""

from __future__ import annotations

from typing import Any

from streams.core.groups.offers import offers
from streams.core.groups.state import GroupState


def describe(group_id: str, state: GroupState) -> dict[str, Any]:
    """Each scheduler's figures, the orphans and the offers."""
    return {"group": group_id, "K": state.K, "S": state.S, "sum_N": state.sum_N(),
            "schedulers": {sid: state.figures_of(sid)._asdict() for sid in sorted(state.members)},
            "orphans": sorted(state.orphans), "offers": offers(state),
            "seqs": dict(sorted(state.seqs.items())), "offsets": dict(sorted(state.offsets.items()))}


def explain(before: GroupState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the event did to the group, as its `GroupHealth` record says: what `explain` shows."""
    for output in outputs:
        if output["type"] == "GroupHealth":
            return {"group": {k: output[k] for k in ("event", "applied", "note", "K", "S", "sum_N", "capacity_ok",
                                                     "orphans", "offers", "corrections")}}
    return {}
