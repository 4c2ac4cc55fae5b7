"""Rejection limits for a scheduler group (SPEC §4), folded from the log: the fold's entry point.

The seed's schedulers computed N from ZooKeeper watches, so a lost or reordered watch left N
computed from a stale S and jobs nobody took. Here N is a pure function of the folded log
(`streams.core.groups.state`). After every record the fold offers each orphan job (no live owner)
to the least-loaded online scheduler with room, ties by id (`offers`), and a `MembershipSnapshot`
from the ZooKeeper bridge is turned into the events the log was missing (`snapshot`), each
applied like any other (`events`) and reported with the reason (`emission`).
"""

from __future__ import annotations

from typing import Any, get_args

import orjson
from pydantic import TypeAdapter, ValidationError

from schemas import groups as records
from schemas.groups import MembershipSnapshot
from streams.core.admission import fold_or_reject
from streams.core.deadletter import Rejected
from streams.core.groups.emission import group_records, limits
from streams.core.groups.events import Change, Step, one
from streams.core.groups.snapshot import job_fixes, member_fixes, read_snapshot
from streams.core.groups.state import GroupState, reindex
from streams.core.intake import error_text, readable
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, named_key, record_key

SCHEDULER_EVENTS = "scheduler-events"
JOB_EVENTS = "job-events"
INPUTS: tuple[str, ...] = (SCHEDULER_EVENTS, JOB_EVENTS)

GroupEvent = Change | MembershipSnapshot  # what `schemas.groups.GroupEvent` parses to
_EVENT: TypeAdapter[GroupEvent] = TypeAdapter(records.GroupEvent)
_ON_TOPIC = {  # the event types each input topic carries, as the schemas group them
    SCHEDULER_EVENTS: get_args(get_args(records.SchedulerEvent)[0]),
    JOB_EVENTS: get_args(get_args(records.JobEvent)[0]),
}


def key_of(record: SourceRecord, topic: str = "") -> str:
    """The group a record belongs to: the group its value names, else its key (SPEC §4, §7).

    The value decides, so a keyless event is folded into the group it names, and a keyed one
    whose key names another group is dead-lettered there as `group_mismatch`.
    """
    return named_key(record, "group") or record_key(record)


def apply(state: GroupState, record: SourceRecord, topic: str) -> tuple[GroupState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its group's state."""
    group = key_of(record, topic)

    def step(admitted: GroupState) -> tuple[GroupState, list[Emit]]:
        event, skipped = _parse(record, topic, group)
        return fold_event(admitted, event, record, skipped)

    return fold_or_reject(state, record, group, step)


def _parse(record: SourceRecord, topic: str, group: str) -> tuple[GroupEvent, list[str]]:
    """The event a record carries, and the bad entries of a snapshot that were left out."""
    value = readable(record)
    if topic not in _ON_TOPIC:
        raise Rejected("unknown_topic", f"the limits fold does not read topic {topic!r}")
    skipped: list[str] = []
    event: GroupEvent | None = None
    try:
        event = _EVENT.validate_json(value)
    except ValidationError as error:
        if _object(value).get("type") != "MembershipSnapshot":
            raise Rejected("bad_event", f"invalid group event: {error_text(error)}") from None
    if event is None or isinstance(event, MembershipSnapshot):  # read entry by entry: see `read_snapshot`
        event, skipped = read_snapshot(_object(value))
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


def _fenced(state: GroupState, event: GroupEvent) -> GroupState:
    """The state with the event's publisher term taken, or `Rejected` if a newer term was applied already: a
    publisher that lost its leadership (its successor's events are in the log) publishes nothing over them."""
    term = event.term
    if term is None or term == state.term:
        return state
    if term < state.term:
        raise Rejected("stale_publisher", f"published by {event.publisher or 'an unnamed publisher'} under term "
                                          f"{term}, but term {state.term} has published for the group since: a "
                                          "leadership that ended, its view possibly stale")
    return state._replace(term=term)


def fold_event(state: GroupState, event: GroupEvent, record: SourceRecord,
               skipped: list[str] | None = None) -> tuple[GroupState, list[Emit]]:
    """Apply a parsed event (a snapshot as its corrections) and emit what changed."""
    skipped = skipped or []
    state = _fenced(state, event).begin()
    before_ks = (state.K, state.S)
    step = Step()
    fixes: list[dict[str, Any]] = []
    if isinstance(event, MembershipSnapshot):
        for phase in (member_fixes, job_fixes):  # jobs against the membership the snapshot shows
            for fix, why in phase(state, event):
                state = one(state, fix, step)
                fixes.append({"event": fix.model_dump(mode="json", exclude_none=True), "why": why})
        step.applied = bool(fixes)
        step.note = f"snapshot: {len(fixes)} correction(s)" if fixes else "snapshot agrees with the log"
        if skipped:
            step.note += f"; {len(skipped)} bad entr{'y' if len(skipped) == 1 else 'ies'} left out"
    else:
        state = one(state, event, step)
    group = event.group
    outputs: list[Emit] = []
    state = reindex(state, step.touched)
    state = limits(state, group, record, before_ks, step.touched, outputs)
    state, outputs = group_records(state, group, event.type, step, fixes, skipped, record, outputs)
    return state.fitted(), outputs
