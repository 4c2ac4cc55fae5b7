"""The decider (SPEC §2, the seed's "static priority" design): who grows, who gives instances up.

A pool's state is its compiled policy, its capacity, and per app the instances it runs and the
last metrical it reported. Every function here is pure: it returns a new state and a `Verdict`
that says what moved, from whom, in which round, and why.

Apps are keyed by their case-folded name (`Hadoop` is `hadoop`); outputs spell them as the
policy does. Every iteration is over a sorted order, and preemption shares are computed with
exact fractions, so the same log always yields the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from schemas.policy import DeciderPolicy
from streams.core.persistent import editable, edited, updated
from streams.core.pools.grants import grow
from streams.core.pools.ranks import offered
from streams.core.pools.rules import FREE, NEUTRAL, AppRule, CompiledPolicy, compile_policy, shown
from streams.core.pools.timing import GIVE_ALL, Timing, reported, stabilized, went_stale
from streams.core.pools.verdicts import (
    DeciderState,
    Idle,
    MoveRecord,
    Verdict,
    cap_note,
    decided,
    mark,
    move,
    move_cap,
    named_keys,
    reset,
)


# -- pool events --------------------------------------------------------------------------------
def adopt(state: DeciderState | None, policy: DeciderPolicy, at: int = 0) -> tuple[DeciderState, Verdict]:
    """A policy record (at event time `at`): start the pool, or carry its instances over to the new version.

    A first policy starts every app at `initial` (else MinNum); without `capacity` the pool is
    exactly full. A later version keeps the instances and metricals of the apps it still lists,
    starts new apps like a first policy, drops removed apps (their instances become free), keeps
    the capacity unless it names one, and evicts if the result no longer fits. A version with options
    measured in time (`timing`) restarts the stabilization windows under its own ranges.
    """
    compiled = compile_policy(policy)
    if state is None:
        instances = {r.key: compiled.starting[r.key] for r in compiled.rules}
        capacity = compiled.capacity if compiled.capacity is not None else sum(instances.values())
        metricals = {r.key: NEUTRAL for r in compiled.rules}
        new = DeciderState.of(compiled, capacity, instances, metricals, _timing(compiled, None, metricals, at))
        return new, decided("policy", "policy_started",
                             f"policy {policy.version} started the pool: capacity {capacity}, "
                             + ", ".join(f"{r.name} {instances[r.key]}" for r in compiled.rules))
    moves: list[MoveRecord] = []
    instances, metricals = {}, {}
    for rule in compiled.rules:
        if rule.key in state.instances:
            instances[rule.key] = state.instances[rule.key]
            metricals[rule.key] = state.metricals[rule.key]
        else:
            instances[rule.key] = compiled.starting[rule.key]
            metricals[rule.key] = NEUTRAL
            if instances[rule.key]:
                moves.append(move(FREE, rule.name, instances[rule.key], "policy"))
    for key in sorted(set(state.instances) - set(instances)):
        if state.instances[key]:
            moves.append(move(state.policy.by_key[key].name, FREE, state.instances[key], "policy"))
    capacity = compiled.capacity if compiled.capacity is not None else state.capacity
    new = DeciderState.of(compiled, capacity, instances, metricals, _timing(compiled, state.timing, metricals, at))
    new, evicted, note = _evict(new)
    reason = f"policy {state.policy.version} -> {policy.version}" + (f"; {note}" if note else "")
    return new, decided("evicted" if evicted else "policy", "policy_evicted" if evicted else "policy_changed",
                         reason, [*moves, *evicted])


def _timing(policy: CompiledPolicy, before: Timing | None, metricals: Mapping[str, float], at: int
            ) -> Timing | None:
    """A timed policy's `Timing` as it starts: apps it kept keep their report times and cool-downs; new apps
    are heard of when the policy applied. Windows start empty under the new ranges, so an app with a window
    gives nothing up and asks nothing until it reports; an app still silent is handled by the new version's
    `on_stale` at the next tick (with its own decision)."""
    if not policy.timed:
        return None
    keys = [r.key for r in policy.rules]
    now = max(at, before.now) if before is not None else at
    old = before or Timing(now, {}, {}, {}, {})
    rules = policy.by_key
    return Timing(now=now, started={k: old.started.get(k, now) for k in keys},
                  reported={k: t for k, t in old.reported.items() if k in rules}, reports={},
                  numbers={k: 0 if rules[k].up_ms or rules[k].down_ms else rules[k].number(metricals[k])
                           for k in keys},
                  preempted={k: t for k, t in old.preempted.items() if k in rules})


def set_capacity(state: DeciderState, capacity: int) -> tuple[DeciderState, Verdict]:
    """PoolCapacitySet: a new capacity; evict from the lowest priority first if it no longer fits."""
    before = state.capacity
    state, moves, note = _evict(state.with_capacity(capacity))
    if moves:
        return state, decided("evicted", "capacity_evicted", f"capacity {before} -> {capacity}; {note}", moves)
    return state, decided("resized", "capacity_set", f"capacity {before} -> {capacity}; free {state.free}")


def observe(state: DeciderState, observed: Mapping[str, int]) -> tuple[DeciderState, Verdict]:
    """InstancesObserved: the actuator's counts replace the targets of the apps it lists."""
    instances = editable(state.instances)
    moves = []
    used = state.used
    for key in sorted(observed):
        rule = state.policy.by_key[key]
        delta = observed[key] - instances[key]
        if delta:
            moves.append(move(FREE, rule.name, delta, "observed") if delta > 0
                         else move(rule.name, FREE, -delta, "observed"))
        instances[key] = observed[key]
        used += delta
    state, evicted, note = _evict(state.with_instances(edited(instances), used, observed))
    reason = "observed " + ", ".join(f"{state.policy.by_key[k].name} {observed[k]}" for k in sorted(observed))
    if evicted:
        return state, decided("evicted", "observed_evicted", f"{reason}; {note}", [*moves, *evicted])
    return state, decided("observed", "observed", f"{reason}; free {state.free}", moves)


def _evict(state: DeciderState) -> tuple[DeciderState, list[MoveRecord], str]:
    """Bring the running total within capacity: lowest priority first, down to MinNum, then below."""
    over = -state.free
    if over <= 0:
        return state, [], ""
    instances = editable(state.instances)
    taken: dict[str, int] = {}
    order = sorted(state.policy.rules, key=lambda r: (-r.priority, r.key))
    below_min = False
    for floor_is_min in (True, False):
        for rule in order:
            floor = rule.min_num if floor_is_min else 0
            take = min(over, instances[rule.key] - floor)
            if take > 0:
                instances[rule.key] -= take
                taken[rule.key] = taken.get(rule.key, 0) + take
                over -= take
                below_min = below_min or not floor_is_min
        if over == 0:
            break
    moves = [move(state.policy.by_key[k].name, FREE, n, "evict") for k, n in sorted(taken.items())]
    note = "evicted " + ", ".join(f"{state.policy.by_key[k].name} -{n}" for k, n in sorted(taken.items()))
    if below_min:
        note += " (capacity is below the sum of MinNum: MinNum could not be kept)"
    return state.with_instances(edited(instances), state.used - sum(taken.values()), taken), moves, note


# -- metrics ------------------------------------------------------------------------------------
def on_metric(state: DeciderState, app_key: str, metrical: float) -> tuple[DeciderState, Verdict]:
    """`app-metrical(app, metrical)` for an app of the policy (the caller has checked it is one)."""
    rule = state.policy.by_key[app_key]
    metricals = editable(state.metricals)
    metricals[app_key] = metrical
    number = rule.number(metrical)
    return _decide(state, rule, metrical, metricals, mark(state.idle, rule, number < 0), number)


def _decide(state: DeciderState, rule: AppRule, metrical: float, metricals: MutableMapping[str, float],
            idle: Idle, number: int) -> tuple[DeciderState, Verdict]:
    """What `rule`'s app standing at `number` (its metrical's, or as stabilized) gets; `metricals` are the state's
    with its report, being edited (`persistent.editable`)."""
    if number == 0:
        return state.with_metricals(rule.key, edited(metricals), idle, state.timing), decided(
            "steady", "steady", f"{rule.name} at {shown(metrical)} maps to Number 0: nothing moves")
    if number < 0:
        return _idle(state, rule, metrical, metricals, idle, number)
    return grow(state, rule, metrical, metricals, idle, number)


def on_report(state: DeciderState, app_key: str, metrical: float, at: int) -> tuple[DeciderState, Verdict]:
    """A report at event time `at` under a timed policy: its app's windows decide the Number it stands at.

    The caller has advanced the pool's clock to `at` (`advance`) and refused a report older than the app's
    last (`out_of_order`)."""
    rule = state.policy.by_key[app_key]
    timing = state.timing
    assert timing is not None
    raw = rule.number(metrical)
    longest = max(rule.up_ms, rule.down_ms)
    reports = timing.reports
    window = None
    if longest:
        kept = reported(reports.get(app_key, ()), at, raw, longest)
        reports = {**reports, app_key: kept}
        window = stabilized(kept, raw, rule.up_ms, rule.down_ms)
    number = raw if window is None else window.applied
    timing = timing._replace(reported={**timing.reported, app_key: at}, reports=reports,
                             numbers={**timing.numbers, app_key: number}, stale=timing.stale - {app_key})
    metricals = editable(state.metricals)
    metricals[app_key] = metrical
    new, verdict = _decide(state.with_timing(timing, app_key), rule, metrical, metricals,
                           mark(state.idle, rule, number < 0), number)
    if window is None:
        return new, verdict
    shaped = {"stabilization": window.as_record()}
    if window.applied == raw:
        return new, verdict.shaped_as(shaped)
    field_ = f"scale_{window.direction}_stabilization_s"
    if window.applied == 0:
        would = "gives up" if raw < 0 else "grows"
        return new, verdict.shaped_as(shaped, reason_code="stabilized", reason=(
            f"{rule.name} at {shown(metrical)} maps to Number {raw:+d}, held: within {field_} {window.seconds:g}, not "
            f"every report {would}"))
    return new, verdict.shaped_as(shaped, reason=(
        f"{verdict.reason} (Number {raw:+d} stabilized to {window.applied:+d}: the smallest of the reports "
        f"within {field_} {window.seconds:g})"))


Step = tuple[str, "DeciderState", Verdict]  # the app a stale decision is about, the state after it, the verdict


def advance(state: DeciderState, at: int, fresh: str | None = None) -> tuple[DeciderState, list[Step]]:
    """The pool's clock moved to `at` (a record's event time): apps silent for their `stale_after_s` go stale,
    each with its decision, in app order; `fresh` is the app reporting at `at`.

    Under observe-only each step's state keeps the instances as they stood (its decision's moves are only
    written), so the next app decides from them."""
    timing = state.timing
    if timing is None or at <= timing.now:
        return state, []
    state = state.with_timing(timing._replace(now=at))
    steps: list[Step] = []
    for key in went_stale(timing, state.policy.stale_ms, at, fresh):
        after, verdict = _go_stale(state, state.policy.by_key[key], at)
        if after.policy.observe_only:
            after = after.with_instances(state.instances, state.used, named_keys(after.policy, verdict.moves))
        steps.append((state.policy.by_key[key].name, after, verdict))
        state = after
    return state, steps


def _go_stale(state: DeciderState, rule: AppRule, now: int) -> tuple[DeciderState, Verdict]:
    """`rule`'s app has not reported for its stale_after_s: handled as its `on_stale` says, until it reports."""
    timing = state.timing
    assert timing is not None and rule.stale_ms is not None
    silent = (now - timing.heard(rule.key)) / 1000
    head = f"{rule.name}: no report for {silent:g} s (stale_after_s {rule.stale_ms / 1000:g})"
    shaped = {"stale": {"app": rule.name, "silent_s": silent, "stale_after_s": rule.stale_ms / 1000,
                        "on_stale": rule.on_stale, "fallback_metrical": rule.fallback}}
    metrical = rule.fallback if rule.fallback is not None else state.metricals[rule.key]
    number = {"hold": 0, "idle": GIVE_ALL}.get(rule.on_stale, rule.number(metrical))
    timing = timing._replace(stale=timing.stale | {rule.key}, numbers={**timing.numbers, rule.key: number})
    metricals = editable(state.metricals)
    metricals[rule.key] = metrical
    new, verdict = _decide(state.with_timing(timing, rule.key), rule, metrical, metricals,
                           mark(state.idle, rule, number < 0), number)
    handled = {"hold": f"held at {state.instances[rule.key]} instances, gives none up",
               "idle": "handled as idle, offers all above MinNum",
               "fallback": f"decided as if it reported {shown(metrical)}"}[rule.on_stale]
    detail = "" if rule.on_stale == "hold" else f": {verdict.reason}"
    return new, verdict.shaped_as(shaped, reason=f"{head}: {handled}{detail}", reason_code="stale_metric")


def _idle(state: DeciderState, rule: AppRule, metrical: float, metricals: MutableMapping[str, float],
          idle: Idle, number: int) -> tuple[DeciderState, Verdict]:
    offer = offered(rule, state.instances[rule.key], number)
    if offer == 0:
        return state.with_metricals(rule.key, edited(metricals), idle, state.timing), decided(
            "idle", "idle_at_min", f"{rule.name} at {shown(metrical)} is idle but already at MinNum {rule.min_num}")
    if rule.eager:
        capped = move_cap(state.policy, offer)
        instances = updated(state.instances, rule.key, state.instances[rule.key] - capped)
        metricals[rule.key] = NEUTRAL
        timing, idle = reset(state.timing, rule, idle)
        new = state.changed((rule.key,), instances, edited(metricals), idle, timing, state.used - capped)
        return new, decided(
            "idle", "idle_released", f"{rule.name} at {shown(metrical)} released {capped} to the free pool (eager)"
            + cap_note(state.policy, offer, capped), [move(rule.name, FREE, capped, "release")])
    return state.with_metricals(rule.key, edited(metricals), idle, state.timing), decided(
        "idle", "idle_offered",
        f"{rule.name} at {shown(metrical)} offers {offer} (lazy: kept until someone needs them)")
