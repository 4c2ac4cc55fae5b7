"""A scheduler group's folded state, and the rejection limit every figure derives from (SPEC §4).

    N_i = 1 + K // max(S - n_i, 1)

K counts existing jobs, S live registered schedulers, n_i is scheduler i's fault tolerance.
State lives in persistent maps (structural sharing, O(log n) updates) and schedulers are
indexed by n and by load, so a record costs what it changes, not what the group holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pyrsistent import PMap, PSet, pmap, pset


def limit(K: int, S: int, n: int) -> int:
    """N for a scheduler with fault tolerance n, in a group of K jobs and S live schedulers."""
    return 1 + K // max(S - n, 1)


class Member(NamedTuple):
    scheduler: str
    address: str
    n: int
    M: int


class Figures(NamedTuple):
    """What a `RejectionLimit` record says of one scheduler (the last ones said are kept per scheduler)."""

    live: bool
    n: int
    N: int
    X: int
    M: int
    refuse: bool
    alarm: bool
    offline: bool
    drained: bool


NO_JOBS: PSet[str] = pset()
EMPTY: PMap[Any, Any] = pmap()


class GroupState(NamedTuple):
    """One group, folded. `owners` maps every existing job to its owner (None: nobody holds it)."""

    members: PMap[str, Member] = EMPTY
    offline: PSet[str] = NO_JOBS
    owners: PMap[str, str | None] = EMPTY
    held: PMap[str, PSet[str]] = EMPTY  # owner id (live or not) -> the jobs it holds
    orphans: PSet[str] = NO_JOBS  # existing jobs without a live owner
    by_n: PMap[int, PSet[str]] = EMPTY  # fault tolerance -> live schedulers with it
    by_load: PMap[tuple[int, int], PSet[str]] = EMPTY  # (X, n) -> live online schedulers: who gets offers
    load_of: PMap[str, tuple[int, int]] = EMPTY  # the inverse of by_load
    figures: PMap[str, Figures] = EMPTY  # last figures emitted per scheduler
    offers: PMap[str, str] = EMPTY  # last offers emitted
    capacity_ok: bool = True
    seqs: PMap[str, int] = EMPTY  # output stream and key -> last seq (a group has one per scheduler)
    offsets: Mapping[str, int] = EMPTY  # "topic:partition" -> last offset applied
    applied: int = 0  # inputs applied so far: the next one's `cause.position` is this + 1

    @property
    def K(self) -> int:
        return len(self.owners)

    @property
    def S(self) -> int:
        return len(self.members)

    def X(self, scheduler: str) -> int:
        return len(self.held.get(scheduler, NO_JOBS))

    def N(self, scheduler: str) -> int:
        return limit(self.K, self.S, self.members[scheduler].n)

    def sum_N(self) -> int:
        """N summed over online schedulers: one N per distinct n, times how many online ones have it."""
        K, S = self.K, self.S
        total = sum(limit(K, S, n) * len(ids) for n, ids in self.by_n.items())
        return total - sum(limit(K, S, self.members[sid].n) for sid in self.offline if sid in self.members)

    def figures_of(self, scheduler: str) -> Figures:
        member = self.members[scheduler]
        x, big_n, offline = self.X(scheduler), self.N(scheduler), scheduler in self.offline
        return Figures(True, member.n, big_n, x, member.M, x >= big_n, x > member.M, offline, offline and x == 0)

    def next_seq(self, key: str) -> tuple[GroupState, int]:
        seq = self.seqs.get(key, 0) + 1
        return self._replace(seqs=self.seqs.set(key, seq)), seq


def reindex(state: GroupState, touched: Iterable[str]) -> GroupState:
    """Keep `by_load` current for the schedulers an event touched (every X, liveness or offline change)."""
    by_load, load_of = state.by_load, state.load_of
    for sid in touched:
        old = load_of.get(sid)
        if old is not None:
            rest = by_load[old].discard(sid)
            by_load = by_load.set(old, rest) if rest else by_load.discard(old)
            load_of = load_of.discard(sid)
        member = state.members.get(sid)
        if member is not None and sid not in state.offline:
            key = (state.X(sid), member.n)
            by_load = by_load.set(key, by_load.get(key, NO_JOBS).add(sid))
            load_of = load_of.set(sid, key)
    return state._replace(by_load=by_load, load_of=load_of)
