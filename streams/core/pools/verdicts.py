"""A pool's decider state and what a decision says (`Verdict`): the pieces every event handler
(`decider`) and the grant rounds (`grants`) share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, final

from immutables import Map

from schemas.decisions import Outcome, Round
from streams.core.frozen import Frozen
from streams.core.pools.ranks import PRIORITIES, Ranks, number_of
from streams.core.pools.rules import NEUTRAL, AppRule, CompiledPolicy
from streams.core.pools.timing import Timing

Idle = tuple[frozenset[str], ...]  # the idle apps of each priority (index 1 to PRIORITIES; 0 stays empty): a
# grant's donors are found from the lowest priority up, not by walking every idle app


@final
class DeciderState(Frozen):
    """A pool's decider state: frozen (its attributes are `Final`, read-only when compiled), a native class.

    Built once or twice per record, so not a named tuple: compiled by mypyc, building this costs a C call where
    a named tuple's `__new__` and `_replace` stay Python functions (about fifteen times the cost, measured).

    `instances` and `metricals` hold every app of the policy. Under `decisions: changes` they are persistent
    maps (`immutables.Map`: a change copies a path, not the pool) and the state keeps its `ranks`, so that no
    decision walks the pool; under the whole form, whose every decision lists every app anyway, they are dicts
    in the policy's rule order (`of` makes it so, and every fold copies or updates them in place of order), which
    outputs then list as they stand. Either way they are read by key and changed through `changed`,
    `with_instances` and `with_metricals`, which keep the ranks with them.
    """

    __slots__ = ("capacity", "idle", "instances", "metricals", "policy", "ranks", "timing", "used")

    def __init__(self, policy: CompiledPolicy, capacity: int, instances: Mapping[str, int],
                 metricals: Mapping[str, float], idle: Idle, timing: Timing | None, used: int,
                 ranks: Ranks | None = None) -> None:
        self.policy: Final = policy
        self.capacity: Final = capacity
        self.instances: Final = instances
        self.metricals: Final = metricals
        self.idle: Final = idle  # by priority, apps whose last metrical maps to a negative Number (`timing.numbers`)
        self.timing: Final = timing  # only under a policy with options measured in time
        self.used: Final = used  # sum(instances.values()), kept as instances change: `free` must not walk every app
        self.ranks: Final = ranks  # under `decisions: changes`: who could give, in order (`ranks`)

    def _fields(self) -> tuple[object, ...]:
        return (self.policy, self.capacity, self.instances, self.metricals, self.idle, self.timing, self.used,
                self.ranks)

    @staticmethod
    def of(policy: CompiledPolicy, capacity: int, instances: Mapping[str, int],
           metricals: Mapping[str, float], timing: Timing | None = None) -> DeciderState:
        keys = [r.key for r in policy.rules]
        instances, metricals = {k: instances[k] for k in keys}, {k: metricals[k] for k in keys}
        negative = [r for r in policy.rules if number_of(r, metricals, timing) < 0]
        idle = tuple(frozenset(r.key for r in negative if r.priority == p) for p in range(PRIORITIES + 1))
        used = sum(instances.values())
        if not policy.changes_only:
            return DeciderState(policy, capacity, instances, metricals, idle, timing, used)
        return DeciderState(policy, capacity, Map(instances), Map(metricals), idle, timing, used,
                            Ranks.of(policy, instances, metricals, timing))

    def by_name(self) -> tuple[Mapping[str, int], Mapping[str, float]]:
        """Instances and metricals keyed by the apps' names, in rule order (the states' own where names
        are keys and they are dicts: they are never changed once built)."""
        policy = self.policy
        instances, metricals = self.instances, self.metricals
        if policy.named_as_keys and isinstance(instances, dict) and isinstance(metricals, dict):
            return instances, metricals
        return ({name: instances[key] for name, key in policy.names},
                {name: metricals[key] for name, key in policy.names})

    def by_key(self) -> tuple[Mapping[str, int], Mapping[str, float]]:
        """Instances and metricals keyed by the apps' keys, in rule order (the state's own where they are dicts)."""
        instances, metricals = self.instances, self.metricals
        if isinstance(instances, dict) and isinstance(metricals, dict):
            return instances, metricals
        keys = [r.key for r in self.policy.rules]
        return {k: instances[k] for k in keys}, {k: metricals[k] for k in keys}

    def idle_apps(self) -> frozenset[str]:
        """Every idle app, whatever its priority."""
        return frozenset().union(*self.idle)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def changed(self, keys: Iterable[str], instances: Mapping[str, int], metricals: Mapping[str, float],
                idle: Idle, timing: Timing | None, used: int) -> DeciderState:
        """This state after a decision that changed the apps of `keys` only (their instances, metricals or
        Numbers): `used` is the sum of `instances`, kept by the caller; the ranks follow the apps."""
        ranks = self.ranks
        if ranks is None:
            return DeciderState(self.policy, self.capacity, instances, metricals, idle, timing, used)
        return DeciderState(self.policy, self.capacity, instances, metricals, idle, timing, used,
                            ranks.moved(self.policy, keys, (self.instances, self.metricals, self.timing),
                                        (instances, metricals, timing)))

    def with_instances(self, instances: Mapping[str, int], used: int, keys: Iterable[str]) -> DeciderState:
        """This state with other instances for the apps of `keys`, whose sum the caller has kept (`used`)."""
        return self.changed(keys, instances, self.metricals, self.idle, self.timing, used)

    def with_metricals(self, key: str, metricals: Mapping[str, float], idle: Idle,
                       timing: Timing | None) -> DeciderState:
        """This state with the same instances and `key`'s app reporting: a decision that moved nothing."""
        if self.ranks is None:  # `changed`, without its call: most decisions move nothing
            return DeciderState(self.policy, self.capacity, self.instances, metricals, idle, timing, self.used)
        return self.changed((key,), self.instances, metricals, idle, timing, self.used)

    def with_policy(self, policy: CompiledPolicy) -> DeciderState:
        """This state under another compilation of its policy (`fold.self_contained`: the same rules, another form
        of decision); ranks go with the changes form alone, which reads them."""
        return DeciderState(policy, self.capacity, self.instances, self.metricals, self.idle, self.timing, self.used,
                            self.ranks if policy.changes_only else None)

    def with_capacity(self, capacity: int) -> DeciderState:
        return DeciderState(self.policy, capacity, self.instances, self.metricals, self.idle, self.timing, self.used,
                            self.ranks)

    def with_timing(self, timing: Timing | None, key: str | None = None) -> DeciderState:
        """This state at another time, where only `key`'s app may stand at another Number."""
        if key is not None and self.ranks is not None:
            return self.changed((key,), self.instances, self.metricals, self.idle, timing, self.used)
        return DeciderState(self.policy, self.capacity, self.instances, self.metricals, self.idle, timing, self.used,
                            self.ranks)

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

    __slots__ = ("granted", "moves", "outcome", "reason", "reason_code", "requested", "score_sum", "scored", "scores",
                 "shaped")

    def __init__(self, outcome: Outcome, requested: int, granted: int, moves: tuple[MoveRecord, ...],
                 scores: Mapping[str, float], reason_code: str, reason: str,
                 shaped: Mapping[str, Any] | None = None, scored: int = 0, score_sum: float = 0.0) -> None:
        self.outcome: Final = outcome
        self.requested: Final = requested
        self.granted: Final = granted
        self.moves: Final = moves
        self.scores: Final = scores
        self.reason_code: Final = reason_code
        self.reason: Final = reason
        self.shaped: Final = shaped  # what else shaped it: a stabilization window, stale handling
        self.scored: Final = scored  # how many candidates a preemption scored (`scores` may list only the givers)
        self.score_sum: Final = score_sum  # the sum of their scores, exactly, rounded once

    def _fields(self) -> tuple[object, ...]:
        return (self.outcome, self.requested, self.granted, self.moves, self.scores, self.reason_code, self.reason,
                self.shaped, self.scored, self.score_sum)

    def shaped_as(self, shaped: Mapping[str, Any], reason: str | None = None, reason_code: str | None = None
                  ) -> Verdict:
        """This verdict as a stabilization window or stale handling shaped it (its reason, if given, replaced)."""
        return Verdict(self.outcome, self.requested, self.granted, self.moves, self.scores,
                       self.reason_code if reason_code is None else reason_code,
                       self.reason if reason is None else reason, shaped, self.scored, self.score_sum)


MoveRecord = dict[str, Any]  # a `schemas.decisions.Move`, laid out as it is serialised


def move(source: str, target: str, count: int, round_: Round) -> MoveRecord:
    return {"from": source, "to": target, "count": count, "round": round_}


def named_keys(policy: CompiledPolicy, moves: Iterable[MoveRecord]) -> list[str]:
    """The keys of the policy's apps the moves name, in rule order (rules are sorted by key): the only apps whose
    instances a decision can have changed."""
    key_of = policy.key_of  # moves name apps as the policy spells them; "free" is none, unless an app is so named
    return sorted({key_of[m[end]] for m in moves for end in ("from", "to") if m[end] in key_of})


def decided(outcome: Outcome, code: str, reason: str, moves: Iterable[MoveRecord] = (), requested: int = 0,
             granted: int = 0, scores: Mapping[str, float] | None = None, scored: int = 0,
             score_sum: float = 0.0) -> Verdict:
    return Verdict(outcome, requested, granted, tuple(moves), scores or {}, code, reason, None, scored, score_sum)


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
