"""What a group's fold writes after each event: changed rejection limits, alerts, offers, the group's health.

Only what changed is written: a scheduler's `RejectionLimit` when its figures moved (a change of
K or S recomputes one N per distinct n, `_changed_by_ks`), `JobOffers` when the offers did, an
`Alert` when an alarm or the group's capacity flips; `GroupHealth` after every event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from immutables import Map

from streams.core.groups.events import Step
from streams.core.groups.offers import offers
from streams.core.groups.state import Figures, GroupState, limit
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, cause_of

REJECTION_LIMITS = "rejection-limits"
GROUP_HEALTH = "group-health"
JOB_OFFERS = "job-offers"
ALERTS = "alerts"
OUTPUTS: tuple[str, ...] = (REJECTION_LIMITS, GROUP_HEALTH, JOB_OFFERS, ALERTS)


def limit_stream(group: str, scheduler: str) -> str:
    """A scheduler's `RejectionLimit` records as one numbered stream: output topic and key."""
    return f"{REJECTION_LIMITS}:{group}/{scheduler}"


def _changed_by_ks(state: GroupState, before: tuple[int, int]) -> Iterable[str]:
    """Schedulers whose N moved because K or S did: one comparison per distinct n."""
    (k0, s0), (k1, s1) = before, (state.K, state.S)
    if (k0, s0) == (k1, s1):
        return ()
    return [sid for n, ids in state.by_n.items() if limit(k0, s0, n) != limit(k1, s1, n) for sid in ids]


def limits(state: GroupState, group: str, record: SourceRecord, before_ks: tuple[int, int], touched: set[str],
           outputs: list[Emit]) -> GroupState:
    candidates = touched.union(_changed_by_ks(state, before_ks))
    figures = state.figures
    for sid in sorted(candidates):
        if sid in state.members:
            now = state.figures_of(sid)
        elif sid in figures:
            old = figures[sid]
            x = state.X(sid)
            now = Figures(False, old.n, 0, x, old.M, True, x > old.M, sid in state.offline, False)
        else:
            continue  # never registered: nothing was ever said about it
        previous = figures.get(sid)
        if now == previous:
            continue
        figures = figures.set(sid, now) if now.live else figures.delete(sid)
        key = f"{group}/{sid}"
        state, seq = state.limit_seq(sid, limit_stream(group, sid))
        live, n, big_n, x, m, refuse, alarm, offline, drained = now
        outputs.append(Emit(REJECTION_LIMITS, key, {
            "type": "RejectionLimit", "group": group, "scheduler": sid, "live": live, "K": state.K, "S": state.S,
            "n": n, "N": big_n, "X": x, "M": m, "refuse": refuse, "alarm": alarm, "offline": offline,
            "drained": drained, "cause": cause_of(record, state.applied), "seq": seq}))
        was_alarm = previous is not None and previous.alarm
        if alarm != was_alarm:
            kind = "alarm" if alarm else "alarm_cleared"
            text = (f"{sid} holds {x} jobs, over its alarm threshold {m}" if alarm
                    else f"{sid} holds {x} jobs, within its alarm threshold {m}")
            state = _alert(state, group, sid, kind, text, x, m, record, outputs)
    return state._replace(figures=figures)


def _alert(state: GroupState, group: str, scheduler: str | None, kind: str, message: str, x: int | None,
           m: int | None, record: SourceRecord, outputs: list[Emit]) -> GroupState:
    state, seq = state.next_seq(f"{ALERTS}:{group}")
    outputs.append(Emit(ALERTS, group, {"type": "Alert", "group": group, "scheduler": scheduler, "kind": kind,
                                        "message": message, "X": x, "M": m,
                                        "cause": cause_of(record, state.applied), "seq": seq}))
    return state


def group_records(state: GroupState, group: str, event_type: str, step: Step, fixes: list[dict[str, Any]],
                  skipped: list[str], record: SourceRecord, outputs: list[Emit]) -> tuple[GroupState, list[Emit]]:
    offered = offers(state)
    sum_n = state.sum_N()
    capacity_ok = sum_n >= state.K
    if capacity_ok != state.capacity_ok:
        text = (f"online schedulers may hold {sum_n} jobs in all, fewer than the {state.K} that exist"
                if not capacity_ok else f"online schedulers may hold {sum_n} jobs, enough for {state.K}")
        state = _alert(state, group, None, "capacity_restored" if capacity_ok else "capacity_short", text,
                       None, None, record, outputs)
        state = state._replace(capacity_ok=capacity_ok)
    offering = Map(offered)
    if offering != state.offers:
        state, seq = state.next_seq(f"{JOB_OFFERS}:{group}")
        outputs.append(Emit(JOB_OFFERS, group, {"type": "JobOffers", "group": group, "offers": offered,
                                                "cause": cause_of(record, state.applied), "seq": seq}))
        state = state._replace(offers=offering)
    state, seq = state.next_seq(f"{GROUP_HEALTH}:{group}")
    outputs.append(Emit(GROUP_HEALTH, group, {
        "type": "GroupHealth", "group": group, "event": event_type, "applied": step.applied, "note": step.note,
        "K": state.K, "S": state.S, "sum_N": sum_n, "capacity_ok": capacity_ok, "orphans": sorted(state.orphans),
        "offers": offered, "corrections": fixes, "skipped": skipped, "cause": cause_of(record, state.applied),
        "seq": seq}))
    return state, outputs
