"""A group's state as JSON for the worker's tables, and back; the derived indexes are rebuilt on load.

Two tables: `group-state` holds what is the group's alone (offline list, offers, its other
streams' seqs, offsets) and how many buckets it has, rewritten by every record; `group-buckets`
holds each bucket of jobs and their owners (`group/j<bucket>`) and each bucket of schedulers
(registration, last figures, seq: `group/s<bucket>`), each rewritten only when a record changed
one of its jobs or schedulers. Buckets hold about 32 names at most (`buckets.Hashed`), so a record writes
about the same bytes in a group of 1,000 jobs as in one of 100,000. An entry written before the
jobs and schedulers had tables of their own holds them inline (`owners`, `members`, `figures`, and
each scheduler's seq in `seqs`): it is read as it is, and every bucket is written at the next batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from immutables import Map

from streams.core.buckets import Buckets, Hashed, changed
from streams.core.groups.state import Figures, GroupState, Member
from streams.core.persistent import set_of

Stored = Mapping[str, Mapping[str, Any] | None]  # a table's entries for one group: bucket name -> entry
NONE_STORED: Stored = Map()
JOBS, SCHEDULERS = "j", "s"  # the two kinds of bucket in `group-buckets`, by the first letter of their names


def dump(state: GroupState) -> dict[str, Any]:
    out = {
        "offline": sorted(state.offline),
        "job_bits": _bits(state.owners), "scheduler_bits": _bits(state.members),
        "offers": dict(sorted(state.offers.items())),
        "capacity_ok": state.capacity_ok,
        "seqs": dict(sorted(state.seqs.items())),
        "offsets": dict(sorted(state.offsets.items())),
        "applied": state.applied,
    }
    if state.term:  # only once a fenced publisher was applied: an entry of a group without one reads as before
        out["term"] = state.term
    return out


def _bits(buckets: Buckets[Any]) -> int:
    """How many bits of a name's hash name its bucket (`buckets.Hashed`; the entry lists no bucket names)."""
    assert isinstance(buckets.of, Hashed)
    return buckets.of.bits


def _scheduler_buckets(state: GroupState) -> set[str]:
    return {*state.members.buckets.keys(), *state.figures.buckets.keys(), *state.limit_seqs.buckets.keys()}


def dump_jobs(state: GroupState, name: str) -> dict[str, str | None]:
    """One bucket's jobs and their owners (empty once its last job is gone)."""
    return dict(state.owners.bucket(name))


def dump_schedulers(state: GroupState, name: str) -> dict[str, dict[str, Any]]:
    """One bucket's schedulers: each one's registration while it is registered, last figures while it has any,
    and the seq of its last `RejectionLimit`."""
    out: dict[str, dict[str, Any]] = {}
    for sid, m in state.members.bucket(name):
        out[sid] = {"member": [m.address, m.n, m.M]}
    for sid, f in state.figures.bucket(name):
        out.setdefault(sid, {})["figures"] = list(f)
    for sid, seq in state.limit_seqs.bucket(name):
        out.setdefault(sid, {})["seq"] = seq
    return dict(sorted(out.items()))


def touched(before: GroupState, after: GroupState) -> frozenset[str]:
    """The buckets a record changed."""
    jobs = changed(before.owners, after.owners)
    schedulers = (changed(before.members, after.members) | changed(before.figures, after.figures)
                  | changed(before.limit_seqs, after.limit_seqs))
    if not (jobs or schedulers):
        return frozenset()
    return frozenset([JOBS + name for name in jobs] + [SCHEDULERS + name for name in schedulers])


def dump_bucket(state: GroupState, name: str) -> dict[str, Any]:
    """One bucket's entry, jobs or schedulers by the first letter of its name."""
    return dump_jobs(state, name[1:]) if name[0] == JOBS else dump_schedulers(state, name[1:])


def _names(entry: Mapping[str, Any] | None, field: str) -> list[str]:
    return Hashed(entry[field]).names() if entry and field in entry else []


def listed(entry: Mapping[str, Any] | None) -> list[str]:
    """The buckets a `group-state` entry has (none in an entry that holds its jobs and schedulers inline)."""
    return [JOBS + name for name in _names(entry, "job_bits")] + [SCHEDULERS + name
                                                                   for name in _names(entry, "scheduler_bits")]


def stored(state: GroupState) -> dict[str, Any]:
    """Every bucket's entry: the state as `load` takes it, after `dump`."""
    return {**{JOBS + name: dump_jobs(state, name) for name in state.owners.buckets},
            **{SCHEDULERS + name: dump_schedulers(state, name) for name in _scheduler_buckets(state)}}


def load(data: Mapping[str, Any] | None, stored: Stored = NONE_STORED) -> GroupState:
    """The inverse of `dump` and `dump_bucket`; the derived indexes (held, orphans, by_n) are rebuilt from owners."""
    if not data:
        return GroupState()
    inline_jobs, inline_schedulers = "owners" in data, "members" in data
    owners: dict[str, str | None] = dict(data["owners"]) if inline_jobs else {
        job: owner for name in _names(data, "job_bits") for job, owner in (stored.get(JOBS + name) or {}).items()}
    if inline_schedulers:
        entries: dict[str, Mapping[str, Any]] = {sid: {"member": m} for sid, m in data["members"].items()}
        for sid, f in data["figures"].items():
            entries[sid] = {**entries.get(sid, {}), "figures": f}
    else:
        entries = {sid: entry for name in _names(data, "scheduler_bits")
                   for sid, entry in (stored.get(SCHEDULERS + name) or {}).items()}
    members = {sid: Member(sid, a, int(n), int(m)) for sid, e in entries.items() if "member" in e
               for a, n, m in [e["member"]]}
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
    figures = {sid: Figures(*e["figures"]) for sid, e in entries.items() if "figures" in e}
    seqs = {sid: int(e["seq"]) for sid, e in entries.items() if "seq" in e}
    job_of = Hashed.fitting(len(owners)) if inline_jobs else Hashed(data["job_bits"])
    scheduler_of = Hashed.fitting(len(entries)) if inline_schedulers else Hashed(data["scheduler_bits"])
    return GroupState(
        members=Buckets.of_items(scheduler_of, members.items(), inline_schedulers), offline=frozenset(offline),
        owners=Buckets.of_items(job_of, owners.items(), inline_jobs),
        held=Map({o: set_of(j) for o, j in held.items()}), orphans=set_of(orphans),
        by_n=Map({n: set_of(ids) for n, ids in by_n.items()}),
        by_load=Map({key: set_of(ids) for key, ids in by_load.items()}),
        load_of=Map({sid: key for key, ids in by_load.items() for sid in ids}),
        figures=Buckets.of_items(scheduler_of, figures.items(), inline_schedulers),
        limit_seqs=Buckets.of_items(scheduler_of, seqs.items(), inline_schedulers), offers=Map(data["offers"]),
        capacity_ok=bool(data["capacity_ok"]), seqs=Map(data["seqs"]), offsets=dict(data["offsets"]),
        applied=int(data.get("applied", 0)), term=int(data.get("term", 0)))
