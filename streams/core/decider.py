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
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, NamedTuple

from schemas.decisions import Outcome, Round
from schemas.policy import METRICAL_MAX, AppPolicy, DeciderPolicy

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

    def number(self, metrical: float) -> int:
        """The Number of the range holding `metrical`: [lo, hi), the range ending at 100 closed."""
        known = self.by_integer.get(metrical)  # the common case: an integer score
        if known is not None:
            return known
        for lo, hi, number in self.ranges:
            if lo <= metrical < hi or (metrical == hi == METRICAL_MAX):
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


def _rule(app: AppPolicy) -> AppRule:
    rule = AppRule(name=app.App, key=app.App.casefold(), priority=app.Priority, min_num=app.MinNum,
                   max_num=app.MaxNum, eager=app.release == "eager",
                   ranges=tuple(sorted((s.Metrical[0], s.Metrical[1], s.Number) for s in app.Spec)))
    return replace(rule, by_integer={float(m): rule.number(float(m)) for m in range(METRICAL_MAX + 1)})


def compile_policy(policy: DeciderPolicy) -> CompiledPolicy:
    rules = tuple(sorted((_rule(a) for a in policy.apps), key=lambda r: r.key))
    starting = {name.casefold(): n for name, n in policy.starting_instances().items()}
    lower_than = {p: tuple(r for r in rules if r.priority > p) for p in range(1, 11)}
    not_lower = {p: tuple(r for r in rules if r.priority <= p) for p in range(1, 11)}
    return CompiledPolicy(version=policy.version, capacity=policy.capacity, starting=starting, rules=rules,
                          by_key={r.key: r for r in rules}, lower_than=lower_than, not_lower=not_lower,
                          names=tuple((r.name, r.key) for r in rules),
                          named_as_keys=all(r.name == r.key for r in rules), source=policy)


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
    idle: frozenset[str] = frozenset()  # apps whose last metrical maps to a negative Number

    @classmethod
    def of(cls, policy: CompiledPolicy, capacity: int, instances: Mapping[str, int],
           metricals: Mapping[str, float]) -> DeciderState:
        keys = [r.key for r in policy.rules]
        instances, metricals = {k: instances[k] for k in keys}, {k: metricals[k] for k in keys}
        idle = frozenset(k for k, m in metricals.items() if policy.by_key[k].number(m) < 0)
        return cls(policy, capacity, instances, metricals, idle)

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
def adopt(state: DeciderState | None, policy: DeciderPolicy) -> tuple[DeciderState, Verdict]:
    """A policy record: start the pool, or carry its instances over to the new version.

    A first policy starts every app at `initial` (else MinNum); without `capacity` the pool is
    exactly full. A later version keeps the instances and metricals of the apps it still lists,
    starts new apps like a first policy, drops removed apps (their instances become free), keeps
    the capacity unless it names one, and evicts if the result no longer fits.
    """
    compiled = compile_policy(policy)
    if state is None:
        instances = {r.key: compiled.starting[r.key] for r in compiled.rules}
        capacity = compiled.capacity if compiled.capacity is not None else sum(instances.values())
        new = DeciderState.of(compiled, capacity, instances, {r.key: NEUTRAL for r in compiled.rules})
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
    new = DeciderState.of(compiled, capacity, instances, metricals)
    new, evicted, note = _evict(new)
    reason = f"policy {state.policy.version} -> {policy.version}" + (f"; {note}" if note else "")
    return new, _verdict("evicted" if evicted else "policy", "policy_evicted" if evicted else "policy_changed",
                         reason, [*moves, *evicted])


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
    idle = _mark(state.idle, app_key, number < 0)
    if number == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle), _verdict(
            "steady", "steady", f"{rule.name} at {metrical:g} maps to Number 0: nothing moves")
    if number < 0:
        return _idle(state, rule, metrical, metricals, idle, number)
    return _grow(state, rule, metrical, metricals, idle, number)


def _idle(state: DeciderState, rule: AppRule, metrical: float, metricals: dict[str, float],
          idle: frozenset[str], number: int) -> tuple[DeciderState, Verdict]:
    offer = offered(rule, state.instances[rule.key], number)
    if offer == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle), _verdict(
            "idle", "idle_at_min", f"{rule.name} at {metrical:g} is idle but already at MinNum {rule.min_num}")
    if rule.eager:
        instances = {**state.instances, rule.key: state.instances[rule.key] - offer}
        metricals[rule.key] = NEUTRAL
        idle = _mark(idle, rule.key, rule.number(NEUTRAL) < 0)
        return DeciderState(state.policy, state.capacity, instances, metricals, idle), _verdict(
            "idle", "idle_released", f"{rule.name} at {metrical:g} released {offer} to the free pool (eager)",
            [_move(rule.name, FREE, offer, "release")])
    return DeciderState(state.policy, state.capacity, state.instances, metricals, idle), _verdict(
        "idle", "idle_offered", f"{rule.name} at {metrical:g} offers {offer} (lazy: kept until someone needs them)")


def _grow(state: DeciderState, rule: AppRule, metrical: float, metricals: dict[str, float],
          idle: frozenset[str], number: int) -> tuple[DeciderState, Verdict]:
    instances = dict(state.instances)
    me = rule.key
    wanted = number if rule.max_num is None else max(0, min(number, rule.max_num - instances[me]))
    if wanted == 0:
        return DeciderState(state.policy, state.capacity, state.instances, metricals, idle), _verdict(
            "rejected", "at_max_num", f"{rule.name} wants +{number} but is at MaxNum {rule.max_num}")
    need = wanted
    moves: list[MoveRecord] = []
    notes: list[str] = []

    # Round 1: free capacity.
    take = min(need, max(0, state.capacity - sum(instances.values())))
    if take:
        instances[me] += take
        need -= take
        moves.append(_move(FREE, rule.name, take, "free"))
        notes.append(f"{take} from free capacity")
    else:
        notes.append("no free capacity")

    # Round 2: idle donors of any priority, lowest priority first, then larger surplus, then name.
    if need:
        by_key = state.policy.by_key
        offers = {}
        for k in idle:  # an idle app's Number is negative: it offers min(-Number, instances - MinNum)
            if k != me:
                donor = by_key[k]
                offer = min(-donor.number(metricals[k]), instances[k] - donor.min_num)
                if offer > 0:
                    offers[k] = offer
        donors = sorted((by_key[k] for k in offers), key=lambda r: (-r.priority, -offers[r.key], r.key))
        given = []
        for donor in donors:
            give = min(need, offers[donor.key])
            instances[donor.key] -= give
            instances[me] += give
            metricals[donor.key] = NEUTRAL
            idle = _mark(idle, donor.key, donor.number(NEUTRAL) < 0)
            need -= give
            moves.append(_move(donor.name, rule.name, give, "idle"))
            given.append(f"{donor.name} {give}")
            if not need:
                break
        if given:
            notes.append("idle donors gave " + ", ".join(given))
        else:
            notes.append("no idle app above MinNum" + _busy(state, rule, metricals))

    # Round 3: preemption of strictly lower priority, by score, largest remainder, until met.
    scores: dict[str, float] = {}
    if need:
        lower = state.policy.lower_than[rule.priority]
        candidates = [r for r in lower if instances[r.key] > r.min_num]
        if not lower:
            notes.append(f"no app has lower priority than {rule.name} (P{rule.priority})")
        elif not candidates:
            notes.append("lower-priority apps are at MinNum: " + ", ".join(r.name for r in lower))
        else:
            exact = {r.key: _score(metricals[r.key], r.priority) for r in candidates}
            scores = {state.policy.by_key[k].name: float(v) for k, v in sorted(exact.items())}
            taken = _preempt(need, exact, {r.key: instances[r.key] - r.min_num for r in candidates})
            for key, n in sorted(taken.items()):
                instances[key] -= n
                instances[me] += n
                need -= n
                moves.append(_move(state.policy.by_key[key].name, rule.name, n, "preempt"))
            names = state.policy.by_key
            notes.append("preempted " + ", ".join(f"{names[k].name} {n}" for k, n in sorted(taken.items())))

    granted = wanted - need
    outcome: Outcome = "scaled" if need == 0 else ("partial" if granted else "rejected")
    code = {"scaled": "granted", "partial": "partially_granted", "rejected": "no_capacity"}[outcome]
    capped = f" (capped by MaxNum {rule.max_num})" if wanted < number else ""
    reason = f"{rule.name} at {metrical:g} wants +{wanted}{capped}: " + "; ".join(notes) + f"; granted {granted}"
    return DeciderState(state.policy, state.capacity, instances, metricals, idle), _verdict(
        outcome, code, reason, moves, requested=wanted, granted=granted, scores=scores)


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
