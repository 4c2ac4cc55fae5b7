"""A group's state as JSON for the worker's table, and back; the derived indexes are rebuilt on load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyrsistent import PSet, pmap, pset

from streams.core.groups.state import Figures, GroupState, Member


def dump(state: GroupState) -> dict[str, Any]:
    return {
        "members": {sid: [m.address, m.n, m.M] for sid, m in sorted(state.members.items())},
        "offline": sorted(state.offline),
        "owners": dict(sorted(state.owners.items())),
        "figures": {sid: list(f) for sid, f in sorted(state.figures.items())},
        "offers": dict(sorted(state.offers.items())),
        "capacity_ok": state.capacity_ok,
        "seqs": dict(sorted(state.seqs.items())),
        "offsets": dict(sorted(state.offsets.items())),
        "applied": state.applied,
    }


def _sized(items: set[str]) -> PSet[str]:
    """A persistent set with room to grow: pyrsistent's default would rehash it on its next add."""
    return pset(items, pre_size=2 * len(items) + 8)


def load(data: Mapping[str, Any] | None) -> GroupState:
    """The inverse of `dump`; the derived indexes (held, orphans, by_n) are rebuilt from owners."""
    if not data:
        return GroupState()
    members = {sid: Member(sid, a, int(n), int(m)) for sid, (a, n, m) in data["members"].items()}
    owners: dict[str, str | None] = dict(data["owners"])
    held: dict[str, set[str]] = {}
    for job, owner in owners.items():
        if owner is not None:
            held.setdefault(owner, set()).add(job)
    by_n: dict[int, set[str]] = {}
    for sid, member in members.items():
        by_n.setdefault(member.n, set()).add(sid)
    orphans = {job for job, owner in owners.items() if owner is None or owner not in members}
    offline = set(data["offline"])
    by_load: dict[tuple[int, int], set[str]] = {}
    for sid, member in members.items():
        if sid not in offline:
            by_load.setdefault((len(held.get(sid, ())), member.n), set()).add(sid)
    figures = {sid: Figures(*f) for sid, f in data["figures"].items()}
    return GroupState(
        members=pmap(members), offline=pset(offline), owners=pmap(owners),
        held=pmap({o: _sized(j) for o, j in held.items()}), orphans=_sized(orphans),
        by_n=pmap({n: _sized(ids) for n, ids in by_n.items()}),
        by_load=pmap({key: _sized(ids) for key, ids in by_load.items()}),
        load_of=pmap({sid: key for key, ids in by_load.items() for sid in ids}),
        figures=pmap(figures), offers=pmap(data["offers"]),
        capacity_ok=bool(data["capacity_ok"]), seqs=pmap(data["seqs"]), offsets=dict(data["offsets"]),
        applied=int(data.get("applied", 0)))
