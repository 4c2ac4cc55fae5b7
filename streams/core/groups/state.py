"""A scheduler group's folded state, and the rejection limit every figure derives from (SPEC §4).

    N_i = 1 + K // max(S - n_i, 1)

K counts existing jobs, S live registered schedulers, n_i is scheduler i's fault tolerance.
State lives in persistent maps (structural sharing, O(log n) updates) and schedulers are
indexed by n and by load, so a record costs what it changes, not what the group holds. What grows
with the group (each job's owner; each scheduler's registration, last figures and seq) is kept in
buckets by a hash of the name (`buckets.Buckets`), which the worker stores one table entry each,
so a record rewrites the buckets of the jobs and schedulers it changed, not 100,000 jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from immutables import Map

from streams.core.buckets import Buckets, Hashed, refitted
from streams.core.persistent import PSet, added, without


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


Owners = Buckets[str | None]  # every existing job -> its owner (None: nobody holds it)
NO_OWNERS: Owners = Buckets(Hashed())
NO_MEMBERS: Buckets[Member] = Buckets(Hashed())
NO_FIGURES: Buckets[Figures] = Buckets(Hashed())
NO_SEQS: Buckets[int] = Buckets(Hashed())
NO_JOBS: PSet[str] = Map()
EMPTY: Map[Any, Any] = Map()


class GroupState(NamedTuple):
    """One group, folded. `owners` maps every existing job to its owner (None: nobody holds it)."""

    members: Buckets[Member] = NO_MEMBERS
    offline: frozenset[str] = frozenset()  # the operators' offline list: a few ids, a plain frozen set
    owners: Owners = NO_OWNERS
    held: Map[str, PSet[str]] = EMPTY  # owner id (live or not) -> the jobs it holds
    orphans: PSet[str] = NO_JOBS  # existing jobs without a live owner
    by_n: Map[int, PSet[str]] = EMPTY  # fault tolerance -> live schedulers with it
    by_load: Map[tuple[int, int], PSet[str]] = EMPTY  # (X, n) -> live online schedulers: who gets offers
    load_of: Map[str, tuple[int, int]] = EMPTY  # the inverse of by_load
    figures: Buckets[Figures] = NO_FIGURES  # last figures emitted per scheduler
    limit_seqs: Buckets[int] = NO_SEQS  # scheduler -> last seq of its `RejectionLimit` records
    offers: Map[str, str] = EMPTY  # last offers emitted
    capacity_ok: bool = True
    seqs: Map[str, int] = EMPTY  # the group's other output streams -> last seq (and, read from an entry written
    # before the schedulers had a table of their own, each scheduler's until it is next numbered: `limit_seq`)
    offsets: Mapping[str, int] = EMPTY  # "topic:partition" -> last offset applied
    applied: int = 0  # inputs applied so far: the next one's `cause.position` is this + 1
    term: int = 0  # the newest publisher term applied (`schemas.groups.Published`): older ones are refused

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

    def limit_seq(self, scheduler: str, key: str) -> tuple[GroupState, int]:
        """The next seq of `scheduler`'s `RejectionLimit` records (output stream and key `key`)."""
        last, seqs = self.limit_seqs.get(scheduler), self.seqs
        if last is None and key in seqs:  # read from an entry of the older layout: moved to the scheduler's bucket
            last, seqs = seqs[key], without(seqs, key)
        seq = (last or 0) + 1
        return self._replace(limit_seqs=self.limit_seqs.set(scheduler, seq), seqs=seqs), seq

    def scheduler_count(self) -> int:
        """Schedulers the state says anything of (registered, with last figures, or numbered)."""
        return max(len(self.members), len(self.figures), len(self.limit_seqs))

    def fitted(self) -> GroupState:
        """The same state with as many buckets as it needs (`buckets.Hashed`): a record ends. The schedulers'
        three maps share their buckets, so that a scheduler's table entry holds all that is said of it."""
        state = self
        of = refitted(self.owners.of, len(self.owners))
        if of is not None:
            state = state._replace(owners=self.owners.rebucketed(of))
        of = refitted(self.members.of, self.scheduler_count())
        if of is not None:
            state = state._replace(members=self.members.rebucketed(of), figures=self.figures.rebucketed(of),
                                   limit_seqs=self.limit_seqs.rebucketed(of))
        return state

    def begin(self) -> GroupState:
        """The same state with no bucket touched yet: a record begins."""
        return self._replace(owners=self.owners.untouched(), members=self.members.untouched(),
                             figures=self.figures.untouched(), limit_seqs=self.limit_seqs.untouched())


def reindex(state: GroupState, touched: Iterable[str]) -> GroupState:
    """Keep `by_load` current for the schedulers an event touched (every X, liveness or offline change)."""
    by_load, load_of = state.by_load, state.load_of
    for sid in touched:
        old = load_of.get(sid)
        if old is not None:
            rest = without(by_load[old], sid)
            by_load = by_load.set(old, rest) if rest else without(by_load, old)
            load_of = without(load_of, sid)
        member = state.members.get(sid)
        if member is not None and sid not in state.offline:
            key = (state.X(sid), member.n)
            by_load = by_load.set(key, added(by_load.get(key, NO_JOBS), sid))
            load_of = load_of.set(sid, key)
    return state._replace(by_load=by_load, load_of=load_of)
