"""Reconciling a group with a ZooKeeper snapshot: the events the log was missing, each with why.

The periodic `MembershipSnapshot` from the bridge is the repair for lost watches: it is turned
into ordinary changes (schedulers first, then jobs against the membership it shows), each
applied like any other and reported as a correction. `read_snapshot` reads one entry by entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from schemas.groups import (
    JobAcquired,
    JobCreated,
    JobDeleted,
    JobReleased,
    MembershipSnapshot,
    Published,
    SchedulerLost,
    SchedulerOfflineRequested,
    SchedulerOnlineRequested,
    SchedulerRegistered,
)
from streams.core.deadletter import Rejected
from streams.core.groups.events import Change
from streams.core.groups.state import GroupState, Member
from streams.core.intake import error_text


def member_fixes(state: GroupState, snap: MembershipSnapshot) -> list[tuple[Change, str]]:
    """The scheduler events that would bring the folded group to what the snapshot shows, each with why."""
    g = snap.group
    out: list[tuple[Change, str]] = []
    seen = {s.scheduler: s for s in snap.schedulers}
    for sid in sorted(sid for sid in state.members if sid not in seen):
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


def job_fixes(state: GroupState, snap: MembershipSnapshot) -> list[tuple[Change, str]]:
    """The job events the snapshot shows missing, against a state whose schedulers it already fixed."""
    g = snap.group
    out: list[tuple[Change, str]] = []
    for job in sorted(job for job in state.owners if job not in snap.jobs):
        out.append((JobDeleted(group=g, job=job), f"job {job} no longer exists"))
    for job in sorted(snap.jobs):
        owner, known = snap.jobs[job], state.owners.get(job)
        if job not in state.owners:
            out.append((JobCreated(group=g, job=job), f"job {job} was never seen created"))
        if known is not None and known != owner:
            out.append((JobReleased(group=g, job=job, scheduler=known), f"{known} no longer holds job {job}"))
        if owner is not None and owner != known:
            out.append((JobAcquired(group=g, job=job, scheduler=owner), f"{owner} holds job {job}"))
    return out


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
    try:  # who published it: unlike an entry, not to be left out (a term that cannot be read cannot be fenced)
        by = Published.model_validate({k: raw[k] for k in ("publisher", "term") if k in raw})
    except ValidationError as e:
        raise Rejected("bad_event", f"a MembershipSnapshot's publisher or term: {error_text(e)}") from None
    snapshot = MembershipSnapshot(group=group, schedulers=list(members.values()), jobs=owners, offline=listed,
                                  publisher=by.publisher, term=by.term)
    return snapshot, skipped
