"""Rejection limits for a scheduler group (SPEC §4), folded from the log.

The seed's schedulers computed N from ZooKeeper watches, so a lost or reordered watch left N
computed from a stale S and jobs nobody took. Here N is a pure function of the folded log:

    N_i = 1 + K // max(S - n_i, 1)

K counts existing jobs, S live registered schedulers, n_i is scheduler i's fault tolerance. After
every record the fold offers each orphan job (no live owner) to the least-loaded online scheduler
with room (ties by id), and a `MembershipSnapshot` from the ZooKeeper bridge is turned into the
events the log was missing, each applied like any other and reported with the reason.

Cost per record: state lives in persistent maps (structural sharing, O(log n) updates), and
schedulers are indexed by n, so a change of K or S recomputes one N per distinct n and visits
only the schedulers whose N actually changed. Only orphans make a record cost more than that.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError
from pyrsistent import PMap, PSet, pmap, pset

from schemas.limits import (
    GroupEvent,
    JobAcquired,
    JobCreated,
    JobDeleted,
    JobReleased,
    MembershipSnapshot,
    SchedulerLost,
    SchedulerOfflineRequested,
    SchedulerOnlineRequested,
    SchedulerRegistered,
)
from streams.core.deadletter import Rejected, rejected
from streams.core.evolve import evolve
from streams.core.intake import error_text, readable
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, cause_of, named_key, origin, record_key

SCHEDULER_EVENTS = "scheduler-events"
JOB_EVENTS = "job-events"
INPUTS = (SCHEDULER_EVENTS, JOB_EVENTS)
REJECTION_LIMITS = "rejection-limits"
GROUP_HEALTH = "group-health"
JOB_OFFERS = "job-offers"
ALERTS = "alerts"
OUTPUTS = (REJECTION_LIMITS, GROUP_HEALTH, JOB_OFFERS, ALERTS)

_EVENT: TypeAdapter[Any] = TypeAdapter(GroupEvent)
_ON_TOPIC = {
    SCHEDULER_EVENTS: (SchedulerRegistered, SchedulerLost, SchedulerOfflineRequested, SchedulerOnlineRequested,
                       MembershipSnapshot),
    JOB_EVENTS: (JobCreated, JobDeleted, JobAcquired, JobReleased),
}

Figures = tuple[bool, int, int, int, int, bool, bool, bool, bool]  # live, n, N, X, M, refuse, alarm, offline, drained


def limit(K: int, S: int, n: int) -> int:
    """N for a scheduler with fault tolerance n, in a group of K jobs and S live schedulers."""
    return 1 + K // max(S - n, 1)


@dataclass(frozen=True, slots=True)
class Member:
    scheduler: str
    address: str
    n: int
    M: int


_NO_JOBS: PSet[str] = pset()
_EMPTY: PMap[Any, Any] = pmap()


@dataclass(frozen=True, slots=True)
class GroupState:
    """One group, folded. `owners` maps every existing job to its owner (None: nobody holds it)."""

    members: PMap[str, Member] = _EMPTY
    offline: PSet[str] = _NO_JOBS
    owners: PMap[str, str | None] = _EMPTY
    held: PMap[str, PSet[str]] = _EMPTY  # owner id (live or not) -> the jobs it holds
    orphans: PSet[str] = _NO_JOBS  # existing jobs without a live owner
    by_n: PMap[int, PSet[str]] = _EMPTY  # fault tolerance -> live schedulers with it
    by_load: PMap[tuple[int, int], PSet[str]] = _EMPTY  # (X, n) -> live online schedulers: who gets offers
    load_of: PMap[str, tuple[int, int]] = _EMPTY  # the inverse of by_load
    figures: PMap[str, Figures] = _EMPTY  # last figures emitted per scheduler
    offers: PMap[str, str] = _EMPTY  # last offers emitted
    capacity_ok: bool = True
    seqs: PMap[str, int] = _EMPTY
    offsets: PMap[str, int] = _EMPTY
    applied: int = 0  # inputs applied so far: the next one's `cause.position` is this + 1

    @property
    def K(self) -> int:
        return len(self.owners)

    @property
    def S(self) -> int:
        return len(self.members)

    def X(self, scheduler: str) -> int:
        return len(self.held.get(scheduler, _NO_JOBS))

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
        return (True, member.n, big_n, x, member.M, x >= big_n, x > member.M, offline, offline and x == 0)

    def evolve(self, **changes: Any) -> GroupState:
        return evolve(self, **changes)

    def next_seq(self, key: str) -> tuple[GroupState, int]:
        seq = self.seqs.get(key, 0) + 1
        return self.evolve(seqs=self.seqs.set(key, seq)), seq


@dataclass(slots=True)
class _Step:
    """What one event did: the schedulers whose own figures may have moved, and a note for the record."""

    touched: set[str] = field(default_factory=set)
    applied: bool = True
    note: str = ""


# -- the events -----------------------------------------------------------------------------------
def _discard(held: PMap[str, PSet[str]], owner: str, job: str) -> PMap[str, PSet[str]]:
    jobs = held.get(owner, _NO_JOBS).discard(job)
    return held.set(owner, jobs) if jobs else held.discard(owner)


def _add(held: PMap[str, PSet[str]], owner: str, job: str) -> PMap[str, PSet[str]]:
    return held.set(owner, held.get(owner, _NO_JOBS).add(job))


def _register(state: GroupState, e: SchedulerRegistered, step: _Step) -> GroupState:
    member = Member(e.scheduler, e.address, e.fault_tolerance, e.alarm_threshold)
    old = state.members.get(e.scheduler)
    if old == member:
        step.applied, step.note = False, f"{e.scheduler} is registered already"
        return state
    by_n = state.by_n
    if old is not None:
        rest = by_n[old.n].discard(e.scheduler)
        by_n = by_n.set(old.n, rest) if rest else by_n.discard(old.n)
    by_n = by_n.set(member.n, by_n.get(member.n, _NO_JOBS).add(e.scheduler))
    mine = state.held.get(e.scheduler, _NO_JOBS)  # acquisitions seen before the registration
    step.touched.add(e.scheduler)
    step.note = f"{e.scheduler} {'re-registered' if old else 'registered'} (n={member.n}, M={member.M})"
    return state.evolve(members=state.members.set(e.scheduler, member), by_n=by_n,
                   orphans=state.orphans.difference(mine))


def _lose(state: GroupState, scheduler: str, step: _Step) -> GroupState:
    old = state.members.get(scheduler)
    if old is None:
        step.applied, step.note = False, f"{scheduler} is not registered"
        return state
    rest = state.by_n[old.n].discard(scheduler)
    jobs = state.held.get(scheduler, _NO_JOBS)
    owners = state.owners.update(dict.fromkeys(jobs))  # its owner nodes died with its session
    step.touched.add(scheduler)
    step.note = f"{scheduler} lost; {len(jobs)} of its jobs orphaned"
    return state.evolve(members=state.members.discard(scheduler), owners=owners,
                   held=state.held.discard(scheduler), orphans=state.orphans.union(jobs),
                   by_n=state.by_n.set(old.n, rest) if rest else state.by_n.discard(old.n))


def _set_offline(state: GroupState, scheduler: str, offline: bool, step: _Step) -> GroupState:
    if (scheduler in state.offline) == offline:
        step.applied, step.note = False, f"{scheduler} is {'offline' if offline else 'online'} already"
        return state
    step.touched.add(scheduler)
    step.note = f"{scheduler} put {'offline' if offline else 'back online'}"
    return state.evolve(offline=state.offline.add(scheduler) if offline else state.offline.discard(scheduler))


def _create(state: GroupState, job: str, step: _Step) -> GroupState:
    if job in state.owners:
        step.applied, step.note = False, f"job {job} exists already"
        return state
    step.note = f"job {job} created"
    return state.evolve(owners=state.owners.set(job, None), orphans=state.orphans.add(job))


def _delete(state: GroupState, job: str, step: _Step) -> GroupState:
    if job not in state.owners:
        step.applied, step.note = False, f"job {job} does not exist"
        return state
    owner = state.owners[job]
    held = state.held
    if owner is not None:
        held = _discard(held, owner, job)
        step.touched.add(owner)
    step.note = f"job {job} deleted" + (f" (held by {owner})" if owner else "")
    return state.evolve(owners=state.owners.discard(job), held=held, orphans=state.orphans.discard(job))


def _acquire(state: GroupState, job: str, scheduler: str, step: _Step) -> GroupState:
    previous = state.owners.get(job, None)
    if previous == scheduler:
        step.applied, step.note = False, f"{scheduler} holds job {job} already"
        return state
    held = state.held
    notes = []
    if job not in state.owners:
        notes.append(f"job {job} was not known: created")
    if previous is not None:
        held = _discard(held, previous, job)
        step.touched.add(previous)
        notes.append(f"taken over from {previous}, whose release was not seen")
    step.touched.add(scheduler)
    live = scheduler in state.members
    if not live:
        notes.append(f"{scheduler} is not registered: the job stays an orphan until it is")
    step.note = "; ".join([f"{scheduler} acquired job {job}", *notes])
    return state.evolve(owners=state.owners.set(job, scheduler), held=_add(held, scheduler, job),
                   orphans=state.orphans.discard(job) if live else state.orphans.add(job))


def _release(state: GroupState, job: str, scheduler: str, step: _Step) -> GroupState:
    owner = state.owners.get(job, None)
    if job not in state.owners or owner != scheduler:
        step.applied = False
        step.note = f"stale release of job {job} by {scheduler} (owner: {owner or 'nobody'})"
        return state
    step.touched.add(scheduler)
    step.note = f"{scheduler} released job {job}"
    return state.evolve(owners=state.owners.set(job, None), held=_discard(state.held, scheduler, job),
                   orphans=state.orphans.add(job))


def _one(state: GroupState, event: Any, step: _Step) -> GroupState:
    if isinstance(event, SchedulerRegistered):
        return _register(state, event, step)
    if isinstance(event, SchedulerLost):
        return _lose(state, event.scheduler, step)
    if isinstance(event, SchedulerOfflineRequested | SchedulerOnlineRequested):
        return _set_offline(state, event.scheduler, isinstance(event, SchedulerOfflineRequested), step)
    if isinstance(event, JobCreated):
        return _create(state, event.job, step)
    if isinstance(event, JobDeleted):
        return _delete(state, event.job, step)
    if isinstance(event, JobAcquired):
        return _acquire(state, event.job, event.scheduler, step)
    assert isinstance(event, JobReleased)
    return _release(state, event.job, event.scheduler, step)


def member_fixes(state: GroupState, snap: MembershipSnapshot) -> list[tuple[Any, str]]:
    """The scheduler events that would bring the folded group to what the snapshot shows, each with why."""
    g = snap.group
    out: list[tuple[Any, str]] = []
    seen = {s.scheduler: s for s in snap.schedulers}
    for sid in sorted(state.members.keys() - seen.keys()):
        out.append((SchedulerLost(group=g, scheduler=sid), f"{sid} is not registered in ZooKeeper"))
    for sid in sorted(seen):
        s, member = seen[sid], state.members.get(sid)
        if member != Member(sid, s.address, s.fault_tolerance, s.alarm_threshold):
            why = "was never seen registering" if member is None else "registration changed"
            out.append((s.model_copy(update={"group": g}), f"{sid} {why}"))
    if snap.offline is not None:
        wanted = set(snap.offline)
        for sid in sorted(state.offline - wanted):
            out.append((SchedulerOnlineRequested(group=g, scheduler=sid), f"{sid} is not on the offline list"))
        for sid in sorted(wanted.difference(state.offline)):
            out.append((SchedulerOfflineRequested(group=g, scheduler=sid), f"{sid} is on the offline list"))
    return out


def job_fixes(state: GroupState, snap: MembershipSnapshot) -> list[tuple[Any, str]]:
    """The job events the snapshot shows missing, against a state whose schedulers it already fixed."""
    g = snap.group
    out: list[tuple[Any, str]] = []
    for job in sorted(state.owners.keys() - snap.jobs.keys()):
        out.append((JobDeleted(group=g, job=job), f"job {job} no longer exists"))
    for job in sorted(snap.jobs):
        owner, known = snap.jobs[job], state.owners.get(job, None)
        if job not in state.owners:
            out.append((JobCreated(group=g, job=job), f"job {job} was never seen created"))
        if known is not None and known != owner:
            out.append((JobReleased(group=g, job=job, scheduler=known), f"{known} no longer holds job {job}"))
        if owner is not None and owner != known:
            out.append((JobAcquired(group=g, job=job, scheduler=owner), f"{owner} holds job {job}"))
    return out


# -- the fold -------------------------------------------------------------------------------------
def key_of(record: SourceRecord, topic: str = "") -> str:
    """The group a record belongs to: the group its value names, else its key (SPEC §4, §7).

    The value decides, so a keyless event is folded into the group it names, and a keyed one
    whose key names another group is dead-lettered there as `group_mismatch`.
    """
    return named_key(record, "group") or record_key(record)


def apply(state: GroupState, record: SourceRecord, topic: str) -> tuple[GroupState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its group's state."""
    admitted = admit(state, record)
    if admitted is None:
        return state, []
    group = key_of(record, topic)
    try:
        event, skipped = _parse(record, topic, group)
    except Rejected as rejection:
        return reject(admitted, record, rejection, group, admitted=True)
    return fold_event(admitted, event, record, skipped)


def admit(state: GroupState, record: SourceRecord) -> GroupState | None:
    """The state with `record` counted as applied; None if it was (a redelivery after a crash)."""
    where = origin(record)
    if record.offset <= state.offsets.get(where, -1):
        return None
    return state.evolve(offsets=state.offsets.set(where, record.offset), applied=state.applied + 1)


def reject(state: GroupState, record: SourceRecord, rejection: Rejected, group: str,
           admitted: bool = False) -> tuple[GroupState, list[Emit]]:
    if not admitted:
        state = admit(state, record) or state
    return rejected(state, record, rejection, group)


def _parse(record: SourceRecord, topic: str, group: str) -> tuple[Any, list[str]]:
    """The event a record carries, and the bad entries of a snapshot that were left out."""
    value = readable(record)
    if topic not in _ON_TOPIC:
        raise Rejected("unknown_topic", f"the limits fold does not read topic {topic!r}")
    skipped: list[str] = []
    error: ValidationError | None = None
    try:
        event = _EVENT.validate_json(value)
    except ValidationError as e:
        event, error = None, e
    if error is not None or isinstance(event, MembershipSnapshot):
        raw = _object(value)
        if raw.get("type") != "MembershipSnapshot":
            assert error is not None
            raise Rejected("bad_event", f"invalid group event: {error_text(error)}")
        event, skipped = read_snapshot(raw)
    if not isinstance(event, _ON_TOPIC[topic]):
        raise Rejected("wrong_topic", f"{event.type} does not belong on {topic!r}")
    if event.group != group or (bool(record.key) and record_key(record) != group):
        raise Rejected("group_mismatch", f"event names group {event.group!r} but its key is {record_key(record)!r}")
    return event, skipped


def _object(value: bytes) -> dict[str, Any]:
    try:
        raw = orjson.loads(value)
    except orjson.JSONDecodeError:
        raw = None
    return raw if isinstance(raw, dict) else {}


def read_snapshot(raw: Mapping[str, Any]) -> tuple[MembershipSnapshot, list[str]]:
    """A snapshot from its JSON, entry by entry: a bad entry is named and left out, never the whole snapshot.

    The periodic snapshot is the repair for lost watches, so one unreadable scheduler node or an
    owner node without data must not cost the rest of it. A job whose owner is unreadable is kept
    (it exists) without an owner. Only a snapshot without a group, a scheduler list or a job map
    is unusable as a whole: leaving its jobs out would read as every job deleted.
    """
    group, schedulers, jobs, offline = (raw.get(k) for k in ("group", "schedulers", "jobs", "offline"))
    if not (isinstance(group, str) and group and isinstance(schedulers, list) and isinstance(jobs, dict)
            and (offline is None or isinstance(offline, list))):
        raise Rejected("bad_event", "a MembershipSnapshot needs a group, a list of schedulers, a map of jobs to "
                                    "owners and, optionally, an offline list")
    skipped: list[str] = []
    members: dict[str, SchedulerRegistered] = {}
    for i, entry in enumerate(schedulers):
        try:
            member = SchedulerRegistered.model_validate({**entry, "group": group} if isinstance(entry, dict) else entry)
        except ValidationError as e:
            skipped.append(f"schedulers[{i}]: {error_text(e)}")
            continue
        if member.scheduler in members:
            skipped.append(f"schedulers[{i}]: {member.scheduler} is listed twice; the first entry counts")
            continue
        members[member.scheduler] = member
    owners: dict[str, str | None] = {}
    for job, owner in jobs.items():
        if not job:
            skipped.append("jobs: a job without a name")
            continue
        if owner is not None and not (isinstance(owner, str) and owner):
            skipped.append(f"jobs[{job}]: owner {owner!r} names no scheduler; the job is kept without an owner")
            owner = None
        owners[job] = owner
    listed: list[str] | None = None
    if offline is not None:
        listed = []
        for i, sid in enumerate(offline):
            if isinstance(sid, str) and sid:
                listed.append(sid)
            else:
                skipped.append(f"offline[{i}]: {sid!r} names no scheduler")
    snapshot = MembershipSnapshot(group=group, schedulers=list(members.values()), jobs=owners, offline=listed)
    return snapshot, skipped


def fold_event(state: GroupState, event: Any, record: SourceRecord,
               skipped: list[str] | None = None) -> tuple[GroupState, list[Emit]]:
    """Apply a parsed event (a snapshot as its corrections) and emit what changed."""
    skipped = skipped or []
    before_ks = (state.K, state.S)
    step = _Step()
    fixes: list[dict[str, Any]] = []
    if isinstance(event, MembershipSnapshot):
        for phase in (member_fixes, job_fixes):  # jobs against the membership the snapshot shows
            for fix, why in phase(state, event):
                state = _one(state, fix, step)
                fixes.append({"event": fix.model_dump(mode="json"), "why": why})
        step.applied = bool(fixes)
        step.note = f"snapshot: {len(fixes)} correction(s)" if fixes else "snapshot agrees with the log"
        if skipped:
            step.note += f"; {len(skipped)} bad entr{'y' if len(skipped) == 1 else 'ies'} left out"
    else:
        state = _one(state, event, step)
    group = event.group
    outputs: list[Emit] = []
    state = _reindex(state, step.touched)
    state = _limits(state, group, record, before_ks, step.touched, outputs)
    return _group_records(state, group, event.type, step, fixes, skipped, record, outputs)


def _changed_by_ks(state: GroupState, before: tuple[int, int]) -> Iterable[str]:
    """Schedulers whose N moved because K or S did: one comparison per distinct n."""
    (k0, s0), (k1, s1) = before, (state.K, state.S)
    if (k0, s0) == (k1, s1):
        return ()
    return [sid for n, ids in state.by_n.items() if limit(k0, s0, n) != limit(k1, s1, n) for sid in ids]


def _limits(state: GroupState, group: str, record: SourceRecord, before_ks: tuple[int, int], touched: set[str],
            outputs: list[Emit]) -> GroupState:
    candidates = touched.union(_changed_by_ks(state, before_ks))
    figures = state.figures
    for sid in sorted(candidates):
        if sid in state.members:
            now = state.figures_of(sid)
        elif sid in figures:
            old = figures[sid]
            x = state.X(sid)
            now = (False, old[1], 0, x, old[4], True, x > old[4], sid in state.offline, False)
        else:
            continue  # never registered: nothing was ever said about it
        previous = figures.get(sid)
        if now == previous:
            continue
        figures = figures.set(sid, now) if now[0] else figures.discard(sid)
        key = f"{group}/{sid}"
        state, seq = state.next_seq(f"{REJECTION_LIMITS}:{key}")
        live, n, big_n, x, m, refuse, alarm, offline, drained = now
        outputs.append(Emit(REJECTION_LIMITS, key, {
            "type": "RejectionLimit", "group": group, "scheduler": sid, "live": live, "K": state.K, "S": state.S,
            "n": n, "N": big_n, "X": x, "M": m, "refuse": refuse, "alarm": alarm, "offline": offline,
            "drained": drained, "cause": cause_of(record, state.applied), "seq": seq}))
        was_alarm = previous is not None and previous[6]
        if alarm != was_alarm:
            kind = "alarm" if alarm else "alarm_cleared"
            text = (f"{sid} holds {x} jobs, over its alarm threshold {m}" if alarm
                    else f"{sid} holds {x} jobs, within its alarm threshold {m}")
            state = _alert(state, group, sid, kind, text, x, m, record, outputs)
    return state.evolve(figures=figures)


def _alert(state: GroupState, group: str, scheduler: str | None, kind: str, message: str, x: int | None,
           m: int | None, record: SourceRecord, outputs: list[Emit]) -> GroupState:
    state, seq = state.next_seq(f"{ALERTS}:{group}")
    outputs.append(Emit(ALERTS, group, {"type": "Alert", "group": group, "scheduler": scheduler, "kind": kind,
                                        "message": message, "X": x, "M": m,
                                        "cause": cause_of(record, state.applied), "seq": seq}))
    return state


def _reindex(state: GroupState, touched: Iterable[str]) -> GroupState:
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
            by_load = by_load.set(key, by_load.get(key, _NO_JOBS).add(sid))
            load_of = load_of.set(sid, key)
    return state.evolve(by_load=by_load, load_of=load_of)


def offers(state: GroupState) -> dict[str, str]:
    """Each orphan (in id order) to the least-loaded online scheduler with room, ties by id.

    k orphans need at most the k lowest ids of any (X, n) bucket, and no bucket above the X at
    which k candidates are reached (the k-th pick is never above it), so the work depends on the
    orphans and the distinct loads, not on how many schedulers the group has.
    """
    if not state.orphans:
        return {}
    K, S = state.K, state.S
    limits_by_n = {n: limit(K, S, n) for n in state.by_n}
    k = len(state.orphans)
    heap: list[tuple[int, str, int]] = []
    cutoff = None
    for x, n in sorted(key for key in state.by_load if key[0] < limits_by_n[key[1]]):
        if cutoff is not None and x > cutoff:
            break
        heap.extend((x, sid, limits_by_n[n]) for sid in heapq.nsmallest(k, state.by_load[(x, n)]))
        if cutoff is None and len(heap) >= k:
            cutoff = x
    heapq.heapify(heap)
    out: dict[str, str] = {}
    for job in sorted(state.orphans):
        if not heap:
            break
        x, sid, big_n = heap[0]
        out[job] = sid
        if x + 1 < big_n:
            heapq.heapreplace(heap, (x + 1, sid, big_n))
        else:
            heapq.heappop(heap)
    return out


def _group_records(state: GroupState, group: str, event_type: str, step: _Step, fixes: list[dict[str, Any]],
                   skipped: list[str], record: SourceRecord, outputs: list[Emit]) -> tuple[GroupState, list[Emit]]:
    offered = offers(state)
    sum_n = state.sum_N()
    capacity_ok = sum_n >= state.K
    if capacity_ok != state.capacity_ok:
        text = (f"online schedulers may hold {sum_n} jobs in all, fewer than the {state.K} that exist"
                if not capacity_ok else f"online schedulers may hold {sum_n} jobs, enough for {state.K}")
        state = _alert(state, group, None, "capacity_restored" if capacity_ok else "capacity_short", text,
                       None, None, record, outputs)
        state = state.evolve(capacity_ok=capacity_ok)
    if offered != state.offers:
        state, seq = state.next_seq(f"{JOB_OFFERS}:{group}")
        outputs.append(Emit(JOB_OFFERS, group, {"type": "JobOffers", "group": group, "offers": offered,
                                                "cause": cause_of(record, state.applied), "seq": seq}))
        state = state.evolve(offers=pmap(offered))
    state, seq = state.next_seq(f"{GROUP_HEALTH}:{group}")
    outputs.append(Emit(GROUP_HEALTH, group, {
        "type": "GroupHealth", "group": group, "event": event_type, "applied": step.applied, "note": step.note,
        "K": state.K, "S": state.S, "sum_N": sum_n, "capacity_ok": capacity_ok, "orphans": sorted(state.orphans),
        "offers": offered, "corrections": fixes, "skipped": skipped, "cause": cause_of(record, state.applied),
        "seq": seq}))
    return state, outputs


# -- state as JSON, for the worker's table ----------------------------------------------------------
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
    figures: dict[str, Figures] = {sid: tuple(f) for sid, f in data["figures"].items()}
    return GroupState(
        members=pmap(members), offline=pset(offline), owners=pmap(owners),
        held=pmap({o: _sized(j) for o, j in held.items()}), orphans=_sized(orphans),
        by_n=pmap({n: _sized(ids) for n, ids in by_n.items()}),
        by_load=pmap({key: _sized(ids) for key, ids in by_load.items()}),
        load_of=pmap({sid: key for key, ids in by_load.items() for sid in ids}),
        figures=pmap(figures), offers=pmap(data["offers"]),
        capacity_ok=bool(data["capacity_ok"]), seqs=pmap(data["seqs"]), offsets=pmap(data["offsets"]),
        applied=int(data.get("applied", 0)))
