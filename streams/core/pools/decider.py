"""The decider (SPEC §2, the seed's "static priority" design): who grows, who gives instances up.

A pool's state is its compiled policy, its capacity, and per app the instances it runs and the
last metrical it reported. Every function here is pure: it returns a new state and a `Verdict`
that says what moved, from whom, in which round, and why.

Apps are keyed by their case-folded name (`Hadoop` is `hadoop`); outputs spell them as the
policy does. Every iteration is over a sorted order, and preemption shares are computed with
exact fractions, so the same log always yields the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from schemas.decisions import Outcome, Round
from schemas.policy import METRICAL_MAX, AppPolicy, DeciderPolicy
from streams.core.pools.ranges import in_range
from streams.core.pools.timing import GIVE_ALL, Timing, reported, stabilized, went_stale

NEUTRAL = 50.0  # the metrical every app starts at, and a donor is reset to (SPEC §2)
FREE = "free"


@dataclass(frozen=True, slots=True)
class AppRule:
    name: str
    key: str
    priority: int
    min_num: int
    max_num: int | None
    eager: bool
    ranges: tuple[tuple[float, float, int], ...]
    by_integer: Mapping[float, int] = field(default_factory=dict, compare=False)  # Number of 0.0 .. 100.0, precomputed
    up_ms: int = 0  # scale_up_stabilization_s, in ms (0: none)
    down_ms: int = 0  # scale_down_stabilization_s
    stale_ms: int | None = None  # stale_after_s
    on_stale: str = "hold"  # hold, idle or fallback
    fallback: float | None = None  # the metrical of on_stale fallback

    def number(self, metrical: float) -> int:
        """The Number of the range holding `metrical`: [lo, hi), the range ending at 100 closed."""
        known = self.by_integer.get(metrical)  # the common case: an integer score
        return known if known is not None else number_in(self.ranges, metrical)


def number_in(ranges: tuple[tuple[float, float, int], ...], metrical: float) -> int:
    """The Number of the first range holding `metrical` (`in_range`)."""
    for lo, hi, number in ranges:
        if in_range(lo, hi, metrical):
            return number
    return 0  # unreachable for a validated policy, whose ranges cover [0, 100]


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    version: str
    capacity: int | None
    starting: Mapping[str, int]
    rules: tuple[AppRule, ...]  # sorted by key
    by_key: Mapping[str, AppRule] = field(compare=False)
    lower_than: Mapping[int, tuple[AppRule, ...]] = field(compare=False)  # priority -> strictly lower rules
    not_lower: Mapping[int, tuple[AppRule, ...]] = field(compare=False)  # priority -> rules of it or higher
    names: tuple[tuple[str, str], ...] = field(compare=False)  # (name, key) of every rule, in rules order
    named_as_keys: bool = field(default=False, compare=False)  # every app's name is its key (no capitals)
    source: DeciderPolicy | None = field(default=None, compare=False)  # the record it was compiled from
    observe_only: bool = False
    max_moves: int | None = None  # max_moves_per_decision
    cooldown_ms: int | None = None  # preempted_cooldown_s
    timed: bool = False  # some option is measured in time: states keep a `Timing`
    stale_ms: Mapping[str, int] = field(default_factory=dict, compare=False)  # app -> stale_after, of apps with one


def _ms(seconds: float | None) -> int:
    return round(seconds * 1000) if seconds else 0


def _rule(app: AppPolicy) -> AppRule:
    ranges = tuple(sorted((s.Metrical[0], s.Metrical[1], s.Number) for s in app.Spec))
    on_stale, fallback = app.stale_handling()
    return AppRule(name=app.App, key=app.App.casefold(), priority=app.Priority, min_num=app.MinNum,
                   max_num=app.MaxNum, eager=app.release == "eager", ranges=ranges,
                   by_integer={float(m): number_in(ranges, float(m)) for m in range(METRICAL_MAX + 1)},
                   up_ms=_ms(app.scale_up_stabilization_s), down_ms=_ms(app.scale_down_stabilization_s),
                   stale_ms=_ms(app.stale_after_s) or None, on_stale=on_stale, fallback=fallback)


def compile_policy(policy: DeciderPolicy) -> CompiledPolicy:
    rules = tuple(sorted((_rule(a) for a in policy.apps), key=lambda r: r.key))
    starting = {name.casefold(): n for name, n in policy.starting_instances().items()}
    lower_than = {p: tuple(r for r in rules if r.priority > p) for p in range(1, 11)}
    not_lower = {p: tuple(r for r in rules if r.priority <= p) for p in range(1, 11)}
    return CompiledPolicy(version=policy.version, capacity=policy.capacity, starting=starting, rules=rules,
                          by_key={r.key: r for r in rules}, lower_than=lower_than, not_lower=not_lower,
                          names=tuple((r.name, r.key) for r in rules),
                          named_as_keys=all(r.name == r.key for r in rules), source=policy,
                          observe_only=policy.observe_only, max_moves=policy.max_moves_per_decision,
                          cooldown_ms=_ms(policy.preempted_cooldown_s) or None, timed=policy.timed(),
                          stale_ms={r.key: r.stale_ms for r in rules if r.stale_ms})


class DeciderState(NamedTuple):
    """A pool's decider state; a named tuple, built once per record (see `streams.core.outputs`).

    `instances` and `metricals` hold every app of the policy, in the policy's rule order (`of`
    makes it so, and every fold copies or updates them in place of order): outputs list apps in
    that order, and where names are keys they are the output's mappings as they stand.
    """

    policy: CompiledPolicy
    capacity: int
    instances: Mapping[str, int]
    metricals: Mapping[str, float]
    idle: frozenset[str] = frozenset()  # apps whose last metrical maps to a negative Number (`timing.numbers`)
    timing: Timing | None = None  # only under a policy with options measured in time

    @classmethod
    def of(cls, policy: CompiledPolicy, capacity: int, instances: Mapping[str, int],
           metricals: Mapping[str, float], timing: Timing | None = None) -> DeciderState:
        keys = [r.key for r in policy.rules]
        instances, metricals = {k: instances[k] for k in keys}, {k: metricals[k] for k in keys}
        if timing is None:
            idle = frozenset(k for k, m in metricals.items() if policy.by_key[k].number(m) < 0)
        else:
            idle = frozenset(k for k in keys if timing.numbers[k] < 0)
        return cls(policy, capacity, instances, metricals, idle, timing)

    def by_name(self) -> tuple[Mapping[str, int], Mapping[str, float]]:
        """Instances and metricals keyed by the apps' names, in rule order (the states' own where names
        are keys: they are never changed once built)."""
        policy = self.policy
        if policy.named_as_keys:
            return self.instances, self.metricals
        instances, metricals = self.instances, self.metricals
        return ({name: instances[key] for name, key in policy.names},
                {name: metricals[key] for name, key in policy.names})

    @property
    def free(self) -> int:
        return self.capacity - sum(self.instances.values())


def _mark(idle: frozenset[str], key: str, is_idle: bool) -> frozenset[str]:
    if (key in idle) == is_idle:
        return idle
    return idle | {key} if is_idle else idle - {key}


class Verdict(NamedTuple):
    outcome: Outcome
    requested: int
    granted: int
    moves: tuple[MoveRecord, ...]
    scores: Mapping[str, float]
    reason_code: str
    reason: str
    shaped: Mapping[str, Any] | None = None  # what else shaped it: a stabilization window, stale handling


MoveRecord = dict[str, Any]  # a `schemas.decisions.Move`, laid out as it is serialised


def _move(source: str, target: str, count: int, round_: Round) -> MoveRecord:
    return {"from": source, "to": target, "count": count, "round": round_}


def _verdict(outcome: Outcome, code: str, reason: str, moves: Iterable[MoveRecord] = (), requested: int = 0,
             granted: int = 0, scores: Mapping[str, float] | None = None) -> Verdict:
    return Verdict(outcome, requested, granted, tuple(moves), scores or {}, code, reason)


def offered(rule: AppRule, instances: int, number: int) -> int:
    """What an idle app offers: min(-Number, instances - MinNum); 0 unless its Number is negative."""
    return max(0, min(-number, instances - rule.min_num)) if number < 0 else 0


def surplus(rule: AppRule, instances: int, metrical: float) -> int:
    return offered(rule, instances, rule.number(metrical))


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
        return new, _verdict("policy", "policy_started",
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
                moves.append(_move(FREE, rule.name, instances[rule.key], "policy"))
    for key in sorted(set(state.instances) - set(instances)):
        if state.instances[key]:
            moves.append(_move(state.policy.by_key[key].name, FREE, state.instances[key], "policy"))
    capacity = compiled.capacity if compiled.capacity is not None else state.capacity
    new = DeciderState.of(compiled, capacity, instances, metricals, _timing(compiled, state.timing, metricals, at))
    new, evicted, note = _evict(new)
    reason = f"policy {state.policy.version} -> {policy.version}" + (f"; {note}" if note else "")
    return new, _verdict("evicted" if evicted else "policy", "policy_evicted" if evicted else "policy_changed",
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
    state, moves, note = _evict(state._replace(capacity=capacity))
    if moves:
        return state, _verdict("evicted", "capacity_evicted", f"capacity {before} -> {capacity}; {note}", moves)
    return state, _verdict("resized", "capacity_set", f"capacity {before} -> {capacity}; free {state.free}")


def observe(state: DeciderState, observed: Mapping[str, int]) -> tuple[DeciderState, Verdict]:
    """InstancesObserved: the actuator's counts replace the targets of the apps it lists."""
    instances = dict(state.instances)
    moves = []
    for key in sorted(observed):
        rule = state.policy.by_key[key]
        delta = observed[key] - instances[key]
        if delta:
            moves.append(_move(FREE, rule.name, delta, "observed") if delta > 0
                         else _move(rule.name, FREE, -delta, "observed"))
        instances[key] = observed[key]
    state, evicted, note = _evict(state._replace(instances=instances))
    reason = "observed " + ", ".join(f"{state.policy.by_key[k].name} {observed[k]}" for k in sorted(observed))
    if evicted:
        return state, _verdict("evicted", "observed_evicted", f"{reason}; {note}", [*moves, *evicted])
    return state, _verdict("observed", "observed", f"{reason}; free {state.free}", moves)


def _evict(state: DeciderState) -> tuple[DeciderState, list[MoveRecord], str]:
    """Bring the running total within capacity: lowest priority first, down to MinNum, then below."""
    over = -state.free
    if over <= 0:
        return state, [], ""
    instances = dict(state.instances)
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
    moves = [_move(state.policy.by_key[k].name, FREE, n, "evict") for k, n in sorted(taken.items())]
    note = "evicted " + ", ".join(f"{state.policy.by_key[k].name} -{n}" for k, n in sorted(taken.items()))
    if below_min:
        note += " (capacity is below the sum of MinNum: MinNum could not be kept)"
    return state._replace(instances=instances), moves, note


# -- metrics ------------------------------------------------------------------------------------
def on_metric(state: DeciderState, app_key: str, metrical: float) -> tuple[DeciderState, Verdict]:
    """`app-metrical(app, metrical)` for an app of the policy (the caller has checked it is one)."""
    rule = state.policy.by_key[app_key]
    metricals = {**state.metricals, app_key: metrical}
    number = rule.number(metrical)
    return _decide(state, rule, metrical, metricals, _mark(state.idle, app_key, number < 0), number)


def _decide(state: DeciderState, rule: AppRule, metrical: float, metricals: dict[str, float],
            idle: frozenset[str], number: int) -> tuple[DeciderState, Verdict]:
    """What `rule`'s app standing at `number` (its metrical's, or as stabilized) gets."""
    if number == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle, state.timing), _verdict(
            "steady", "steady", f"{rule.name} at {metrical:g} maps to Number 0: nothing moves")
    if number < 0:
        return _idle(state, rule, metrical, metricals, idle, number)
    return _grow(state, rule, metrical, metricals, idle, number)


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
    metricals = {**state.metricals, app_key: metrical}
    new, verdict = _decide(state._replace(timing=timing), rule, metrical, metricals,
                           _mark(state.idle, app_key, number < 0), number)
    if window is None:
        return new, verdict
    shaped = {"stabilization": window.as_record()}
    if window.applied == raw:
        return new, verdict._replace(shaped=shaped)
    field_ = f"scale_{window.direction}_stabilization_s"
    if window.applied == 0:
        would = "gives up" if raw < 0 else "grows"
        return new, verdict._replace(reason_code="stabilized", shaped=shaped, reason=(
            f"{rule.name} at {metrical:g} maps to Number {raw:+d}, held: within {field_} {window.seconds:g}, not "
            f"every report {would}"))
    return new, verdict._replace(shaped=shaped, reason=(
        f"{verdict.reason} (Number {raw:+d} stabilized to {window.applied:+d}: the smallest of the reports "
        f"within {field_} {window.seconds:g})"))


Step = tuple[str, "DeciderState", Verdict]  # the app a stale decision is about, the state after it, the verdict


def advance(state: DeciderState, at: int, fresh: str | None = None) -> tuple[DeciderState, list[Step]]:
    """The pool's clock moved to `at` (a record's event time): apps silent for their `stale_after_s` go stale,
    each with its decision, in app order; `fresh` is the app reporting at `at`."""
    timing = state.timing
    if timing is None or at <= timing.now:
        return state, []
    state = state._replace(timing=timing._replace(now=at))
    steps: list[Step] = []
    for key in went_stale(timing, state.policy.stale_ms, at, fresh):
        state, verdict = _go_stale(state, state.policy.by_key[key], at)
        steps.append((state.policy.by_key[key].name, state, verdict))
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
    metricals = {**state.metricals, rule.key: metrical}
    new, verdict = _decide(state._replace(timing=timing), rule, metrical, metricals,
                           _mark(state.idle, rule.key, number < 0), number)
    handled = {"hold": f"held at {state.instances[rule.key]} instances, gives none up",
               "idle": "handled as idle, offers all above MinNum",
               "fallback": f"decided as if it reported {metrical:g}"}[rule.on_stale]
    detail = "" if rule.on_stale == "hold" else f": {verdict.reason}"
    return new, verdict._replace(reason_code="stale_metric", reason=f"{head}: {handled}{detail}", shaped=shaped)


def _idle(state: DeciderState, rule: AppRule, metrical: float, metricals: dict[str, float],
          idle: frozenset[str], number: int) -> tuple[DeciderState, Verdict]:
    offer = offered(rule, state.instances[rule.key], number)
    if offer == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle, state.timing), _verdict(
            "idle", "idle_at_min", f"{rule.name} at {metrical:g} is idle but already at MinNum {rule.min_num}")
    if rule.eager:
        capped = _capped(state.policy, offer)
        instances = {**state.instances, rule.key: state.instances[rule.key] - capped}
        metricals[rule.key] = NEUTRAL
        timing, idle = _reset(state.timing, rule, idle)
        return DeciderState(state.policy, state.capacity, instances, metricals, idle, timing), _verdict(
            "idle", "idle_released", f"{rule.name} at {metrical:g} released {capped} to the free pool (eager)"
            + _cap_note(state.policy, offer, capped), [_move(rule.name, FREE, capped, "release")])
    return DeciderState(state.policy, state.capacity, state.instances, metricals, idle, state.timing), _verdict(
        "idle", "idle_offered", f"{rule.name} at {metrical:g} offers {offer} (lazy: kept until someone needs them)")


def _capped(policy: CompiledPolicy, count: int) -> int:
    return count if policy.max_moves is None else min(count, policy.max_moves)


def _cap_note(policy: CompiledPolicy, wanted: int, capped: int) -> str:
    return f" (capped by max_moves_per_decision {policy.max_moves})" if capped < wanted else ""


def _reset(timing: Timing | None, rule: AppRule, idle: frozenset[str]) -> tuple[Timing | None, frozenset[str]]:
    """An app that gave instances up stands at the neutral metrical's Number until it reports again."""
    number = rule.number(NEUTRAL)
    if timing is not None:
        timing = timing._replace(numbers={**timing.numbers, rule.key: number})
    return timing, _mark(idle, rule.key, number < 0)


@dataclass(slots=True)
class _Grant:
    """One growth decision while it is worked out: mutable inside the decision, frozen into a state after."""

    rule: AppRule
    need: int
    instances: dict[str, int]
    metricals: dict[str, float]
    idle: frozenset[str]
    timing: Timing | None
    moves: list[MoveRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)

    def take(self, donor: AppRule | None, count: int, round_: Round) -> None:
        """`count` instances to the growing app, from `donor` (None: free capacity)."""
        me = self.rule
        if donor is not None:
            self.instances[donor.key] -= count
        self.instances[me.key] += count
        self.need -= count
        self.moves.append(_move(FREE if donor is None else donor.name, me.name, count, round_))


def _grow(state: DeciderState, rule: AppRule, metrical: float, metricals: dict[str, float],
          idle: frozenset[str], number: int) -> tuple[DeciderState, Verdict]:
    """SPEC §2's three rounds, each only while something is still needed: free, idle donors, preemption."""
    room = number if rule.max_num is None else max(0, min(number, rule.max_num - state.instances[rule.key]))
    if room == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle, state.timing), _verdict(
            "rejected", "at_max_num", f"{rule.name} wants +{number} but is at MaxNum {rule.max_num}")
    wanted = _capped(state.policy, room)
    grant = _Grant(rule, wanted, dict(state.instances), metricals, idle, state.timing)
    _from_free(state, grant)
    if grant.need:
        _from_idle(state, grant)
    if grant.need:
        _by_preemption(state, grant)
    granted = wanted - grant.need
    outcome: Outcome = "scaled" if grant.need == 0 else ("partial" if granted else "rejected")
    code = {"scaled": "granted", "partial": "partially_granted", "rejected": "no_capacity"}[outcome]
    capped = f" (capped by MaxNum {rule.max_num})" if room < number else ""
    reason = (f"{rule.name} at {metrical:g} wants +{wanted}{capped}{_cap_note(state.policy, room, wanted)}: "
              + "; ".join(grant.notes) + f"; granted {granted}")
    new = DeciderState(state.policy, state.capacity, grant.instances, grant.metricals, grant.idle, grant.timing)
    return new, _verdict(outcome, code, reason, grant.moves, requested=wanted, granted=granted, scores=grant.scores)


def _from_free(state: DeciderState, grant: _Grant) -> None:
    """Round 1: free capacity."""
    take = min(grant.need, max(0, state.capacity - sum(grant.instances.values())))
    if take:
        grant.take(None, take, "free")
        grant.notes.append(f"{take} from free capacity")
    else:
        grant.notes.append("no free capacity")


def _from_idle(state: DeciderState, grant: _Grant) -> None:
    """Round 2: idle donors of any priority, lowest priority first, then larger surplus, then name.

    An idle app's Number is negative: it offers min(-Number, instances - MinNum), and a donor's
    metrical is reset to neutral (SPEC §2)."""
    by_key, instances, metricals, me = state.policy.by_key, grant.instances, grant.metricals, grant.rule
    numbers = grant.timing.numbers if grant.timing is not None else None  # as stabilized, under a timed policy
    offers = {}
    for k in grant.idle:
        if k != me.key:
            donor = by_key[k]
            number = donor.number(metricals[k]) if numbers is None else numbers[k]
            offer = min(-number, instances[k] - donor.min_num)
            if offer > 0:
                offers[k] = offer
    given = []
    for donor in sorted((by_key[k] for k in offers), key=lambda r: (-r.priority, -offers[r.key], r.key)):
        give = min(grant.need, offers[donor.key])
        grant.take(donor, give, "idle")
        metricals[donor.key] = NEUTRAL
        grant.timing, grant.idle = _reset(grant.timing, donor, grant.idle)
        given.append(f"{donor.name} {give}")
        if not grant.need:
            break
    if given:
        grant.notes.append("idle donors gave " + ", ".join(given))
    else:
        grant.notes.append("no idle app above MinNum" + _busy(state, me, metricals))


def _by_preemption(state: DeciderState, grant: _Grant) -> None:
    """Round 3: preemption of strictly lower priority, by score, largest remainder, until met; an app in its
    cool-down after a preemption (preempted_cooldown_s) is spared."""
    rule, instances, names = grant.rule, grant.instances, state.policy.by_key
    lower = state.policy.lower_than[rule.priority]
    candidates = [r for r in lower if instances[r.key] > r.min_num]
    if not lower:
        grant.notes.append(f"no app has lower priority than {rule.name} (P{rule.priority})")
        return
    cooling = _cooling(state.policy, grant.timing, candidates)
    if cooling:
        candidates = [r for r in candidates if r.key not in cooling]
    if not candidates:
        grant.notes.append("lower-priority apps are at MinNum" + (" or cooling down" if cooling else "") + ": "
                           + ", ".join(r.name for r in lower))
        return
    exact = {r.key: _score(grant.metricals[r.key], r.priority) for r in candidates}
    grant.scores = {names[k].name: float(v) for k, v in sorted(exact.items())}
    taken = sorted(_preempt(grant.need, exact, {r.key: instances[r.key] - r.min_num for r in candidates}).items())
    for key, n in taken:
        grant.take(names[key], n, "preempt")
    grant.notes.append("preempted " + ", ".join(f"{names[k].name} {n}" for k, n in taken)
                       + (" (cooling down: " + ", ".join(names[k].name for k in cooling) + ")" if cooling else ""))
    if state.policy.cooldown_ms and grant.timing is not None:
        timing = grant.timing
        grant.timing = timing._replace(preempted={**timing.preempted, **{k: timing.now for k, _ in taken}})


def _cooling(policy: CompiledPolicy, timing: Timing | None, candidates: list[AppRule]) -> list[str]:
    """Candidates preempted less than preempted_cooldown_s ago (sorted keys)."""
    if not policy.cooldown_ms or timing is None:
        return []
    return sorted(r.key for r in candidates
                  if r.key in timing.preempted and timing.now - timing.preempted[r.key] < policy.cooldown_ms)


def _busy(state: DeciderState, rule: AppRule, metricals: Mapping[str, float], most: int = 3) -> str:
    """Why the higher- or equal-priority apps gave nothing: they are not idle (the first few named)."""
    busy = [r for r in state.policy.not_lower[rule.priority] if r is not rule]
    if not busy:
        return ""
    named = "; ".join(f"{r.name} (P{r.priority}) is not idle at {metricals[r.key]:g}" for r in busy[:most])
    return f" ({named}{f'; and {len(busy) - most} more' if len(busy) > most else ''})"


def _score(metrical: float, priority: int) -> int | Fraction:
    """100 - metrical + Priority * 10, exactly (higher priority and higher load give up less)."""
    if metrical.is_integer():
        return 100 + priority * 10 - int(metrical)
    return 100 + priority * 10 - Fraction(metrical)


def _preempt(need: int, scores: Mapping[str, int | Fraction], room: Mapping[str, int]) -> dict[str, int]:
    """Split `need` by score with largest-remainder rounding, capped by room; repeat until met.

    Ties for a leftover unit go to the higher score, then the app name. Scores are exact (a float
    metrical is a binary fraction); scaled to integers by their common denominator, every share
    is an integer division, and comparing fractional parts is comparing remainders. Every pass
    hands out at least one unit while anyone has room, so the loop ends.
    """
    den = math.lcm(*(s.denominator for s in scores.values()))
    weight = {k: int(s * den) for k, s in scores.items()}
    taken = dict.fromkeys(room, 0)
    while need > 0:
        open_ = [k for k in sorted(room) if room[k] > taken[k]]
        if not open_:
            break
        total = sum(weight[k] for k in open_)
        split = {k: divmod(need * weight[k], total) for k in open_}
        shares = {k: q for k, (q, _) in split.items()}
        leftover = need - sum(shares.values())
        if leftover:
            for k in sorted(open_, key=lambda k: (-split[k][1], -weight[k], k))[:leftover]:
                shares[k] += 1
        given = 0
        for k in open_:
            give = min(shares[k], room[k] - taken[k])
            taken[k] += give
            given += give
        need -= given
    return {k: n for k, n in taken.items() if n}
