"""A pool's decider state and what a decision says (`Verdict`): the pieces every event handler
(`decider`) and the grant rounds (`grants`) share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, final

from schemas.decisions import Outcome, Round
from streams.core.frozen import Frozen
from streams.core.pools.rules import NEUTRAL, AppRule, CompiledPolicy
from streams.core.pools.timing import Timing

PRIORITIES = 10  # a policy's priorities are 1 (the highest) to 10
Idle = tuple[frozenset[str], ...]  # the idle apps of each priority (index 1 to PRIORITIES; 0 stays empty): a
# grant's donors are found from the lowest priority up, not by walking every idle app


@final
class DeciderState(Frozen):
    """A pool's decider state: frozen (its attributes are `Final`, read-only when compiled), a native class.

    Built once or twice per record, so not a named tuple: compiled by mypyc, building this costs a C call where
    a named tuple's `__new__` and `_replace` stay Python functions (about fifteen times the cost, measured).

    `instances` and `metricals` hold every app of the policy, in the policy's rule order (`of`
    makes it so, and every fold copies or updates them in place of order): outputs list apps in
    that order, and where names are keys they are the output's mappings as they stand.
    """

    __slots__ = ("capacity", "idle", "instances", "metricals", "policy", "timing", "used")

    def __init__(self, policy: CompiledPolicy, capacity: int, instances: dict[str, int],
                 metricals: dict[str, float], idle: Idle, timing: Timing | None, used: int) -> None:
        self.policy: Final = policy
        self.capacity: Final = capacity
        self.instances: Final = instances
        self.metricals: Final = metricals
        self.idle: Final = idle  # by priority, apps whose last metrical maps to a negative Number (`timing.numbers`)
        self.timing: Final = timing  # only under a policy with options measured in time
        self.used: Final = used  # sum(instances.values()), kept as instances change: `free` must not walk every app

    def _fields(self) -> tuple[object, ...]:
        return (self.policy, self.capacity, self.instances, self.metricals, self.idle, self.timing, self.used)

    @staticmethod
    def of(policy: CompiledPolicy, capacity: int, instances: Mapping[str, int],
           metricals: Mapping[str, float], timing: Timing | None = None) -> DeciderState:
        keys = [r.key for r in policy.rules]
        instances, metricals = {k: instances[k] for k in keys}, {k: metricals[k] for k in keys}
        if timing is None:
            negative = [r for r in policy.rules if r.number(metricals[r.key]) < 0]
        else:
            negative = [r for r in policy.rules if timing.numbers[r.key] < 0]
        idle = tuple(frozenset(r.key for r in negative if r.priority == p) for p in range(PRIORITIES + 1))
        return DeciderState(policy, capacity, instances, metricals, idle, timing, sum(instances.values()))

    def by_name(self) -> tuple[Mapping[str, int], Mapping[str, float]]:
        """Instances and metricals keyed by the apps' names, in rule order (the states' own where names
        are keys: they are never changed once built)."""
        policy = self.policy
        if policy.named_as_keys:
            return self.instances, self.metricals
        instances, metricals = self.instances, self.metricals
        return ({name: instances[key] for name, key in policy.names},
                {name: metricals[key] for name, key in policy.names})

    def idle_apps(self) -> frozenset[str]:
        """Every idle app, whatever its priority."""
        return frozenset().union(*self.idle)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def with_instances(self, instances: dict[str, int], used: int) -> DeciderState:
        """This state with other instances, whose sum the caller has kept (`used`)."""
        return DeciderState(self.policy, self.capacity, instances, self.metricals, self.idle, self.timing, used)

    def with_metricals(self, metricals: dict[str, float], idle: Idle,
                       timing: Timing | None) -> DeciderState:
        """This state with the same instances: a decision that moved nothing."""
        return DeciderState(self.policy, self.capacity, self.instances, metricals, idle, timing, self.used)

    def with_policy(self, policy: CompiledPolicy) -> DeciderState:
        """This state under another compilation of its policy (`fold.self_contained`: the same rules, another form
        of decision)."""
        return DeciderState(policy, self.capacity, self.instances, self.metricals, self.idle, self.timing, self.used)

    def with_capacity(self, capacity: int) -> DeciderState:
        return DeciderState(self.policy, capacity, self.instances, self.metricals, self.idle, self.timing, self.used)

    def with_timing(self, timing: Timing | None) -> DeciderState:
        return DeciderState(self.policy, self.capacity, self.instances, self.metricals, self.idle, timing, self.used)


def mark(idle: Idle, rule: AppRule, is_idle: bool) -> Idle:
    """`idle` with `rule`'s app in it or not."""
    p, key = rule.priority, rule.key
    level = idle[p]
    if (key in level) == is_idle:
        return idle
    return (*idle[:p], level | {key} if is_idle else level - {key}, *idle[p + 1:])


@final
class Verdict(Frozen):
    """What a decision says; built once per record, a native class for the reason `DeciderState` is."""

    __slots__ = ("granted", "moves", "outcome", "reason", "reason_code", "requested", "scores", "shaped")

    def __init__(self, outcome: Outcome, requested: int, granted: int, moves: tuple[MoveRecord, ...],
                 scores: Mapping[str, float], reason_code: str, reason: str,
                 shaped: Mapping[str, Any] | None = None) -> None:
        self.outcome: Final = outcome
        self.requested: Final = requested
        self.granted: Final = granted
        self.moves: Final = moves
        self.scores: Final = scores
        self.reason_code: Final = reason_code
        self.reason: Final = reason
        self.shaped: Final = shaped  # what else shaped it: a stabilization window, stale handling

    def _fields(self) -> tuple[object, ...]:
        return (self.outcome, self.requested, self.granted, self.moves, self.scores, self.reason_code, self.reason,
                self.shaped)

    def shaped_as(self, shaped: Mapping[str, Any], reason: str | None = None, reason_code: str | None = None
                  ) -> Verdict:
        """This verdict as a stabilization window or stale handling shaped it (its reason, if given, replaced)."""
        return Verdict(self.outcome, self.requested, self.granted, self.moves, self.scores,
                       self.reason_code if reason_code is None else reason_code,
                       self.reason if reason is None else reason, shaped)


MoveRecord = dict[str, Any]  # a `schemas.decisions.Move`, laid out as it is serialised


def move(source: str, target: str, count: int, round_: Round) -> MoveRecord:
    return {"from": source, "to": target, "count": count, "round": round_}


def decided(outcome: Outcome, code: str, reason: str, moves: Iterable[MoveRecord] = (), requested: int = 0,
             granted: int = 0, scores: Mapping[str, float] | None = None) -> Verdict:
    return Verdict(outcome, requested, granted, tuple(moves), scores or {}, code, reason)


def offered(rule: AppRule, instances: int, number: int) -> int:
    """What an idle app offers: min(-Number, instances - MinNum); 0 unless its Number is negative."""
    return max(0, min(-number, instances - rule.min_num)) if number < 0 else 0


def surplus(rule: AppRule, instances: int, metrical: float) -> int:
    return offered(rule, instances, rule.number(metrical))


def move_cap(policy: CompiledPolicy, count: int) -> int:
    return count if policy.max_moves is None else min(count, policy.max_moves)


def cap_note(policy: CompiledPolicy, wanted: int, capped: int) -> str:
    return f" (capped by max_moves_per_decision {policy.max_moves})" if capped < wanted else ""


def reset(timing: Timing | None, rule: AppRule, idle: Idle) -> tuple[Timing | None, Idle]:
    """An app that gave instances up stands at the neutral metrical's Number until it reports again."""
    number = rule.number(NEUTRAL)
    if timing is not None:
        timing = timing._replace(numbers={**timing.numbers, rule.key: number})
    return timing, mark(idle, rule, number < 0)
