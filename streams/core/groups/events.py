"""The changes a group's log records (SPEC §4): schedulers registering, lost, put offline; jobs created,
deleted, acquired, released. Each returns the new state and says in its `Step` what it touched."""

from __future__ import annotations

from dataclasses import dataclass, field

from immutables import Map

from schemas.groups import (
    JobAcquired,
    JobCreated,
    JobDeleted,
    JobReleased,
    SchedulerLost,
    SchedulerOfflineRequested,
    SchedulerOnlineRequested,
    SchedulerRegistered,
)
from streams.core.groups.state import NO_JOBS, GroupState, Member
from streams.core.persistent import PSet, added, joined, less, without

Change = (SchedulerRegistered | SchedulerLost | SchedulerOfflineRequested | SchedulerOnlineRequested | JobCreated
          | JobDeleted | JobAcquired | JobReleased)  # what a group event is, a snapshot aside


@dataclass(slots=True)
class Step:
    """What one event did: the schedulers whose own figures may have moved, and a note for the record."""

    touched: set[str] = field(default_factory=set)
    applied: bool = True
    note: str = ""


# -- the events -----------------------------------------------------------------------------------
def _discard(held: Map[str, PSet[str]], owner: str, job: str) -> Map[str, PSet[str]]:
    jobs = without(held.get(owner, NO_JOBS), job)
    return held.set(owner, jobs) if jobs else without(held, owner)


def _add(held: Map[str, PSet[str]], owner: str, job: str) -> Map[str, PSet[str]]:
    return held.set(owner, added(held.get(owner, NO_JOBS), job))


def _register(state: GroupState, e: SchedulerRegistered, step: Step) -> GroupState:
    member = Member(e.scheduler, e.address, e.fault_tolerance, e.alarm_threshold)
    old = state.members.get(e.scheduler)
    if old == member:
        step.applied, step.note = False, f"{e.scheduler} is registered already"
        return state
    by_n = state.by_n
    if old is not None:
        rest = without(by_n[old.n], e.scheduler)
        by_n = by_n.set(old.n, rest) if rest else without(by_n, old.n)
    by_n = by_n.set(member.n, added(by_n.get(member.n, NO_JOBS), e.scheduler))
    mine = state.held.get(e.scheduler, NO_JOBS)  # acquisitions seen before the registration
    step.touched.add(e.scheduler)
    step.note = f"{e.scheduler} {'re-registered' if old else 'registered'} (n={member.n}, M={member.M})"
    return state._replace(members=state.members.set(e.scheduler, member), by_n=by_n,
                          orphans=less(state.orphans, mine))


def _lose(state: GroupState, scheduler: str, step: Step) -> GroupState:
    old = state.members.get(scheduler)
    if old is None:
        step.applied, step.note = False, f"{scheduler} is not registered"
        return state
    rest = without(state.by_n[old.n], scheduler)
    jobs = state.held.get(scheduler, NO_JOBS)
    owners = state.owners.added((job, None) for job in jobs)  # its owner nodes died with its session
    step.touched.add(scheduler)
    step.note = f"{scheduler} lost; {len(jobs)} of its jobs orphaned"
    return state._replace(members=state.members.delete(scheduler), owners=owners,
                          held=without(state.held, scheduler), orphans=joined(state.orphans, jobs),
                          by_n=state.by_n.set(old.n, rest) if rest else without(state.by_n, old.n))


def _set_offline(state: GroupState, scheduler: str, offline: bool, step: Step) -> GroupState:
    if (scheduler in state.offline) == offline:
        step.applied, step.note = False, f"{scheduler} is {'offline' if offline else 'online'} already"
        return state
    step.touched.add(scheduler)
    step.note = f"{scheduler} put {'offline' if offline else 'back online'}"
    return state._replace(offline=state.offline | {scheduler} if offline else state.offline - {scheduler})


def _create(state: GroupState, job: str, step: Step) -> GroupState:
    if job in state.owners:
        step.applied, step.note = False, f"job {job} exists already"
        return state
    step.note = f"job {job} created"
    return state._replace(owners=state.owners.set(job, None), orphans=added(state.orphans, job))


def _delete(state: GroupState, job: str, step: Step) -> GroupState:
    if job not in state.owners:
        step.applied, step.note = False, f"job {job} does not exist"
        return state
    owner = state.owners[job]
    held = state.held
    if owner is not None:
        held = _discard(held, owner, job)
        step.touched.add(owner)
    step.note = f"job {job} deleted" + (f" (held by {owner})" if owner else "")
    return state._replace(owners=state.owners.delete(job), held=held, orphans=without(state.orphans, job))


def _acquire(state: GroupState, job: str, scheduler: str, step: Step) -> GroupState:
    previous = state.owners.get(job)
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
    return state._replace(owners=state.owners.set(job, scheduler), held=_add(held, scheduler, job),
                          orphans=without(state.orphans, job) if live else added(state.orphans, job))


def _release(state: GroupState, job: str, scheduler: str, step: Step) -> GroupState:
    owner = state.owners.get(job)
    if job not in state.owners or owner != scheduler:
        step.applied = False
        step.note = f"stale release of job {job} by {scheduler} (owner: {owner or 'nobody'})"
        return state
    step.touched.add(scheduler)
    step.note = f"{scheduler} released job {job}"
    return state._replace(owners=state.owners.set(job, None), held=_discard(state.held, scheduler, job),
                          orphans=added(state.orphans, job))


def one(state: GroupState, event: Change, step: Step) -> GroupState:
    """Apply one change (an input event, or a correction a snapshot implied)."""
    match event:
        case SchedulerRegistered():
            return _register(state, event, step)
        case SchedulerLost():
            return _lose(state, event.scheduler, step)
        case SchedulerOfflineRequested() | SchedulerOnlineRequested():
            return _set_offline(state, event.scheduler, isinstance(event, SchedulerOfflineRequested), step)
        case JobCreated():
            return _create(state, event.job, step)
        case JobDeleted():
            return _delete(state, event.job, step)
        case JobAcquired():
            return _acquire(state, event.job, event.scheduler, step)
        case JobReleased():
            return _release(state, event.job, event.scheduler, step)
