"""The per-pool fold: every input topic of a pool, in log order, through decider and justice.

`apply(state, record, topic)` is the one entry point that both the Faust agents and file replay
call, so a decision derived live and one derived from an exported log are the same bytes. It
validates, routes by (logical) topic, numbers outputs per pool, and sends anything it cannot use
to the dead-letter stream with the reason; it is idempotent by input offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, final

from pydantic import TypeAdapter, ValidationError

from schemas.cluster import ClusterEvent, InstancesObserved, PoolCapacitySet, PoolTick
from schemas.policy import DeciderPolicy, JusticePolicy, PolicyRecord
from streams.core.admission import NO_COUNTS, offsets_after, reject
from streams.core.deadletter import Rejected
from streams.core.frozen import Frozen
from streams.core.intake import error_text, parse, readable
from streams.core.outputs import Emit
from streams.core.pools import decider, justice
from streams.core.pools.justice import JusticeState
from streams.core.pools.verdicts import DeciderState, MoveRecord, Verdict, named_keys
from streams.core.source import SourceRecord, cause_of, event_time, named_key, record_key

POLICIES = "policies"
CLUSTER_EVENTS = "cluster-events"
PLUGIN_DECIDER = "plugin_decider"
PLUGIN_JUSTICE = "plugin_justice"
INPUTS: tuple[str, ...] = (POLICIES, CLUSTER_EVENTS, PLUGIN_DECIDER, PLUGIN_JUSTICE)
SCALING_DECISIONS = "scaling-decisions"
POOL_INSTANCES = "pool-instances"  # compacted: each app's instances, written by the decision that set them
JUSTICE_OUTCOMES = "justice-outcomes"
OUTPUTS: tuple[str, ...] = (SCALING_DECISIONS, POOL_INSTANCES, JUSTICE_OUTCOMES)

_POLICY = TypeAdapter(PolicyRecord)
_CLUSTER = TypeAdapter(ClusterEvent)


@final
class PoolState(Frozen):
    """A pool's state: frozen (`Final` attributes), a native class built once or twice per record (see
    `DeciderState`)."""

    __slots__ = ("applied", "decider", "justice", "offsets", "seqs")

    def __init__(self, decider: DeciderState | None = None, justice: JusticeState | None = None,
                 seqs: Mapping[str, int] = NO_COUNTS, offsets: Mapping[str, int] = NO_COUNTS, applied: int = 0
                 ) -> None:
        self.decider: Final = decider
        self.justice: Final = justice
        self.seqs: Final = seqs  # output stream -> last seq
        self.offsets: Final = offsets  # "topic:partition" -> last offset applied
        self.applied: Final = applied  # inputs applied so far: the next one's `cause.position` is this + 1

    def _fields(self) -> tuple[object, ...]:
        return (self.decider, self.justice, self.seqs, self.offsets, self.applied)

    def _replace(self, *, offsets: Mapping[str, int], applied: int) -> PoolState:
        """The copy `streams.core.admission` makes of every fold's state (a named tuple's method of this name)."""
        return PoolState(self.decider, self.justice, self.seqs, offsets, applied)

    def with_decider(self, decider: DeciderState | None) -> PoolState:
        return PoolState(decider, self.justice, self.seqs, self.offsets, self.applied)

    def next_seq(self, stream: str) -> tuple[PoolState, int]:
        return self.numbered(stream, self.decider, self.justice)

    def numbered(self, stream: str, with_decider: DeciderState | None,
                 with_justice: JusticeState | None) -> tuple[PoolState, int]:
        """This state with the decider and justice given, and the next seq of `stream` taken: one copy per record."""
        seq = self.seqs.get(stream, 0) + 1
        return PoolState(with_decider, with_justice, {**self.seqs, stream: seq}, self.offsets, self.applied), seq


KEYED = frozenset(INPUTS) - {CLUSTER_EVENTS}  # the inputs whose pool is their record's own key (`key_of`)


def key_of(record: SourceRecord, topic: str) -> str:
    """The pool a record of logical input `topic` belongs to: the pool a cluster event names, else its key.

    Whatever partition the record arrived on, it is folded into this pool's one state.
    """
    if topic == CLUSTER_EVENTS:
        return named_key(record, "pool") or record_key(record)
    return record_key(record)


def apply(state: PoolState, record: SourceRecord, topic: str) -> tuple[PoolState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its pool's state."""
    offsets = offsets_after(state.offsets, record)
    if offsets is None:
        return state, []  # a redelivery after a crash
    state = PoolState(state.decider, state.justice, state.seqs, offsets, state.applied + 1)
    pool = key_of(record, topic)
    try:
        if topic == PLUGIN_DECIDER:  # the busiest first
            return _decider_metric(state, record, pool)
        if topic == POLICIES:
            return _policy(state, record, pool)
        if topic == CLUSTER_EVENTS:
            return _cluster(state, record, pool)
        if topic == PLUGIN_JUSTICE:
            return _justice_metric(state, record, pool)
        raise Rejected("unknown_topic", f"tribunal does not read topic {topic!r}")
    except Rejected as rejection:
        return reject(state, record, rejection, pool, admitted=True)


def _load(adapter: TypeAdapter[Any], record: SourceRecord, what: str) -> object:
    value = readable(record)
    try:
        return adapter.validate_json(value)
    except ValidationError as e:
        raise Rejected(f"bad_{what}", f"invalid {what}: {error_text(e)}") from None


# -- policies and cluster events ----------------------------------------------------------------
def _policy(state: PoolState, record: SourceRecord, pool: str) -> tuple[PoolState, list[Emit]]:
    policy = _load(_POLICY, record, "policy")
    if isinstance(policy, DeciderPolicy):
        started, verdict = decider.adopt(state.decider, policy, event_time(record))
        return _decision(state, started, record, pool, _trigger("policy"), verdict)
    assert isinstance(policy, JusticePolicy)
    rules = justice.adopt(state.justice, policy)
    current = {rules.policy.apps[k]: v for k, v in rules.targets.items()}
    adopted = justice.JusticeVerdict("policy", None, current, dict.fromkeys(current, 0), False,
                                     f"justice policy {policy.version} adopted (driver {rules.policy.driver})")
    return _justice_outcome(state, rules, record, pool, None, adopted)


def _cluster(state: PoolState, record: SourceRecord, pool: str) -> tuple[PoolState, list[Emit]]:
    event = _load(_CLUSTER, record, "event")
    assert isinstance(event, PoolCapacitySet | InstancesObserved | PoolTick)
    if event.pool is not None and (event.pool != pool or (bool(record.key) and record_key(record) != pool)):
        raise Rejected("pool_mismatch", f"event names pool {event.pool!r} but its key is {record_key(record)!r}")
    if isinstance(event, PoolTick):  # the clock: nothing to do before a decider policy, nor under an untimed one
        if state.decider is None or state.decider.timing is None:
            return state, []
        state, current, emits = _advance(state, record, pool, state.decider, event_time(record))
        return state.with_decider(current), emits
    current = _decider_of(state, pool)
    state, current, emits = _advance(state, record, pool, current, event_time(record))
    if isinstance(event, PoolCapacitySet):
        new, verdict = decider.set_capacity(current, event.capacity)
        trigger = _trigger("capacity", capacity=event.capacity)
    else:
        observed = {_app_key(current, name, pool): n for name, n in event.instances.items()}
        new, verdict = decider.observe(current, observed)
        trigger = _trigger("observed")
    state, emitted = _decision(state, new, record, pool, trigger, verdict,
                               current if isinstance(event, PoolCapacitySet) else None)  # observations are true
    return state, [*emits, *emitted]


def _advance(state: PoolState, record: SourceRecord, pool: str, current: DeciderState, at: int,
             fresh: str | None = None) -> tuple[PoolState, DeciderState, list[Emit]]:
    """The pool's clock moved to `at`: a decision for each app that went stale (the record is their cause),
    and the decider to go on from (`decider.advance` keeps the instances under observe-only)."""
    current, steps = decider.advance(current, at, fresh)
    emits: list[Emit] = []
    for app, after, verdict in steps:
        state, emitted = _decision(state, after, record, pool, _trigger("stale", app=app), verdict)
        emits += emitted
    return state, current, emits


def _trigger(kind: str, capacity: int | None = None, app: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "app": app, "metrical": None, "capacity": capacity}


# -- metrics ------------------------------------------------------------------------------------
def _decider_of(state: PoolState, pool: str) -> DeciderState:
    if state.decider is None:
        raise Rejected("no_policy", f"pool {pool!r} has no decider policy yet")
    return state.decider


def _app_key(current: DeciderState, app: str, pool: str) -> str:
    key = app.casefold()
    if key not in current.policy.by_key:
        known = ", ".join(r.name for r in current.policy.rules)
        raise Rejected("unknown_app", f"app {app!r} is not in pool {pool!r}'s policy "
                                      f"{current.policy.version} ({known})")
    return key


def _decider_metric(state: PoolState, record: SourceRecord, pool: str) -> tuple[PoolState, list[Emit]]:
    app, metrical = parse(record, PLUGIN_DECIDER, pool)  # a metric's pool is its record key
    current = _decider_of(state, pool)
    key = _app_key(current, app, pool)
    trigger = {"kind": "metric", "app": current.policy.by_key[key].name, "metrical": metrical, "capacity": None}
    if current.timing is None:
        new, verdict = decider.on_metric(current, key, metrical)
        return _decision(state, new, record, pool, trigger, verdict, current)
    last, at = current.timing.reported.get(key), event_time(record)
    if last is not None and at < last:
        raise Rejected("out_of_order", f"app {app!r} reported at {at}, before its last report "
                                       f"applied ({last}): reports are applied in event time")
    state, current, emits = _advance(state, record, pool, current, at, fresh=key)
    new, verdict = decider.on_report(current, key, metrical, at)
    state, emitted = _decision(state, new, record, pool, trigger, verdict, current)
    return state, [*emits, *emitted]


def self_contained(state: PoolState) -> PoolState:
    """The pool deciding as under `decisions: whole`, each decision stating every app (the same state otherwise):
    `explain` and `what-if` fold a record with it to show a `decisions: changes` pool's whole picture."""
    d = state.decider
    if d is None or not d.policy.changes_only:
        return state
    return state.with_decider(d.with_policy(replace(d.policy, changes_only=False)))


def _decision(state: PoolState, current: DeciderState, record: SourceRecord, pool: str,
              trigger: Mapping[str, Any], verdict: Verdict,
              before: DeciderState | None = None) -> tuple[PoolState, list[Emit]]:
    """The admitted `state` with decider `current`, and its `ScalingDecision` record, as a mapping in the
    model's field order (the hot path).

    Under an observe-only policy the decision is written (`mode: observe`, its moves as they would be) but
    the instances stay as they were `before` (callers give none for policies and the actuator's observations:
    those change them)."""
    observing = current.policy.observe_only
    named = named_keys(current.policy, verdict.moves) if verdict.moves else []
    if observing and before is not None:
        current = current.with_instances(before.instances, before.used, named)
    previous = state.decider
    state, seq = state.numbered(SCALING_DECISIONS, current, state.justice)
    changes = current.policy.changes_only
    same_policy = previous is not None and previous.policy is current.policy
    # the whole pool by name: what the whole form lists, and what a new policy is compared with (never else: it
    # walks the pool)
    instances, metricals = current.by_name() if not changes or not same_policy else ({}, {})
    cause = cause_of(record, state.applied)
    changed: list[tuple[str, int]] = []
    if previous is None or previous.instances is not current.instances:
        if previous is not None and same_policy:
            changed = _moved(previous, current, named)
        else:
            changed = _changed(previous, instances)
    out = {
        "type": "ScalingDecision", "pool": pool, "seq": seq, "cause": cause,
        "policy_version": current.policy.version, "trigger": trigger, "outcome": verdict.outcome,
        "requested": verdict.requested, "granted": verdict.granted, "moves": verdict.moves,
        "instances": instances, "metricals": metricals,
        "capacity": current.capacity, "free": current.free, "scores": verdict.scores,
        "reason_code": verdict.reason_code, "reason": verdict.reason,
    }
    if changes:  # the same fields, holding what the decision changed
        key = _trigger_key(current, trigger)
        out["instances"] = _instances_shown(current, key, changed)
        out["metricals"] = _metricals_shown(previous, current, key, verdict.moves, metricals)
    if observing:
        out["mode"] = "observe"
    if verdict.shaped:
        out.update(verdict.shaped)
    if changes:
        out["form"] = "changes"
        if verdict.scored:
            out["scored"], out["score_sum"] = verdict.scored, verdict.score_sum
    emits = [Emit(SCALING_DECISIONS, pool, out)]
    if changed:
        emits += _instances_set(pool, changed, seq, current.policy.version, cause)
    return state, emits


def _trigger_key(current: DeciderState, trigger: Mapping[str, Any]) -> str | None:
    """The trigger app's key in the policy, if the trigger names one of its apps."""
    app = trigger.get("app")
    return current.policy.key_of.get(app) if isinstance(app, str) else None  # triggers spell apps as policies do


def _instances_shown(current: DeciderState, key: str | None, changed: list[tuple[str, int]]) -> dict[str, int]:
    """`decisions: changes`: the instances of the apps the decision changed (`changed`, as `pool-instances` gets
    them: rule order, then apps that left the policy at 0) and of the trigger app (its key `key`), in rule order."""
    by_key = current.policy.by_key
    if not changed:  # most decisions: the trigger app's alone
        return {} if key is None else {by_key[key].name: current.instances[key]}
    shown = dict(changed)
    if key is None or by_key[key].name in shown:  # `changed` is in that order already
        return shown
    shown[by_key[key].name] = current.instances[key]
    return dict(sorted(shown.items(), key=lambda item: (item[0].casefold() not in by_key, item[0].casefold())))


def _metricals_shown(previous: DeciderState | None, current: DeciderState, key: str | None,
                     moves: tuple[MoveRecord, ...], metricals: Mapping[str, float]) -> dict[str, float]:
    """`decisions: changes`: the trigger app's metrical (its key `key`) and those the decision changed, in rule
    order. Under one policy only the trigger's and those of the idle donors (`moves` of round 2: a donor is reset to
    neutral) can have changed; a new policy is compared app by app."""
    policy = current.policy
    after = current.metricals
    if previous is None or previous.policy is not policy:
        before = previous.by_name()[1] if previous is not None else {}
        trigger = policy.by_key[key].name if key is not None else None
        return {name: m for name, m in metricals.items() if before.get(name) != m or name == trigger}
    reset = sorted({policy.key_of[m["from"]] for m in moves if m["round"] == "idle"})
    if not reset:  # most decisions: only the trigger's report changed a metrical
        return {} if key is None else {policy.by_key[key].name: after[key]}
    before_by_key = previous.metricals
    shown = [k for k in reset if after[k] != before_by_key[k]]
    if key is not None and key not in shown:
        shown = sorted([*shown, key])
    return {policy.by_key[k].name: after[k] for k in shown}


def _moved(previous: DeciderState, current: DeciderState, keys: list[str]) -> list[tuple[str, int]]:
    """`_changed` under one policy, without walking every app: only an app a move names (`keys`, `named_keys`) can
    have changed.

    In rule order, and only those whose instances differ (an app observed up, then evicted back, moved but
    did not change)."""
    policy = current.policy
    before, after = previous.instances, current.instances
    return [(policy.by_key[k].name, after[k]) for k in keys if before[k] != after[k]]


def _changed(previous: DeciderState | None, instances: Mapping[str, int]) -> list[tuple[str, int]]:
    """The apps whose instances differ from `previous`'s, by name: in rule order, then the apps that left the policy
    (at 0); a new policy may drop apps or spell their names otherwise."""
    before = previous.by_name()[0] if previous is not None else {}
    if before == instances:
        return []
    changed = [(app, n) for app, n in instances.items() if before.get(app) != n]
    changed += [(app, 0) for app, n in before.items() if app not in instances and n != 0]
    return changed


def _instances_set(pool: str, changed: list[tuple[str, int]], seq: int, version: str,
                   cause: Mapping[str, Any]) -> list[Emit]:
    """A `PoolInstances` for each app whose instances the decision changed (`changed`), so that the compacted topic's
    latest record per app is the pool's desired state."""
    return [Emit(POOL_INSTANCES, f"{pool}/{app}", {
        "type": "PoolInstances", "pool": pool, "app": app, "instances": n, "seq": seq, "policy_version": version,
        "cause": cause}) for app, n in changed]


def _justice_metric(state: PoolState, record: SourceRecord, pool: str) -> tuple[PoolState, list[Emit]]:
    app, metrical = parse(record, PLUGIN_JUSTICE)
    current = state.justice
    if current is None:
        raise Rejected("no_policy", f"pool {pool!r} has no justice policy yet")
    key = app.casefold()
    if key not in current.policy.apps:
        raise Rejected("unknown_app", f"app {app!r} is not in pool {pool!r}'s justice policy")
    if key != current.policy.driver.casefold():
        raise Rejected("not_driver", f"app {app!r} does not drive justice in pool {pool!r} "
                                     f"(the driver is {current.policy.driver!r})")
    new, verdict = justice.on_metric(current, metrical)
    return _justice_outcome(state, new, record, pool, metrical, verdict)


def _justice_outcome(state: PoolState, new: justice.JusticeState, record: SourceRecord, pool: str,
                     metrical: float | None, verdict: justice.JusticeVerdict) -> tuple[PoolState, list[Emit]]:
    state, seq = state.numbered(JUSTICE_OUTCOMES, state.decider, new)
    out = {"type": "JusticeOutcome", "pool": pool, "seq": seq, "cause": cause_of(record, state.applied),
           "policy_version": new.policy.version, "driver": new.policy.driver, "metrical": metrical,
           "outcome": verdict.outcome, "rule": verdict.rule, "targets": dict(verdict.targets),
           "deltas": dict(verdict.deltas), "changed": verdict.changed, "reason": verdict.reason}
    return state, [Emit(JUSTICE_OUTCOMES, pool, out)]
