"""A decider policy compiled for folding (SPEC §2): each app's rule (priority, MinNum, MaxNum, its
ranges as (lo, hi, Number) triples, release, windows and stale handling in milliseconds), looked up by the
app's case-folded name."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.policy import METRICAL_MAX, AppPolicy, DeciderPolicy
from streams.core.pools.ranges import in_range

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
    by_integer: dict[float, int] = field(default_factory=dict, compare=False)  # Number of 0.0 .. 100.0, precomputed
    up_ms: int = 0  # scale_up_stabilization_s, in ms (0: none)
    down_ms: int = 0  # scale_down_stabilization_s
    stale_ms: int | None = None  # stale_after_s
    on_stale: str = "hold"  # hold, idle or fallback
    fallback: float | None = None  # the metrical of on_stale fallback

    def number(self, metrical: float) -> int:
        """The Number of the range holding `metrical`: [lo, hi), the range ending at 100 closed."""
        known = self.by_integer.get(metrical)  # the common case: an integer score
        return known if known is not None else number_in(self.ranges, metrical)


_SHOWN: dict[float, str] = {float(m): f"{float(m):g}" for m in range(METRICAL_MAX + 1)}


def shown(metrical: float) -> str:
    """`f"{metrical:g}"`, as reasons print a metrical: looked up for the integer scores most reports carry
    (formatting a float is a good part of a small pool's decision)."""
    known = _SHOWN.get(metrical)
    return known if known is not None else f"{metrical:g}"


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
    starting: dict[str, int]
    rules: tuple[AppRule, ...]  # sorted by key
    by_key: dict[str, AppRule] = field(compare=False)
    lower_than: dict[int, tuple[AppRule, ...]] = field(compare=False)  # priority -> strictly lower rules
    not_lower: dict[int, tuple[AppRule, ...]] = field(compare=False)  # priority -> rules of it or higher
    names: tuple[tuple[str, str], ...] = field(compare=False)  # (name, key) of every rule, in rules order
    key_of: dict[str, str] = field(compare=False)  # an app's key by its name as the policy spells it
    named_as_keys: bool = field(default=False, compare=False)  # every app's name is its key (no capitals)
    source: DeciderPolicy | None = field(default=None, compare=False)  # the record it was compiled from
    observe_only: bool = False
    max_moves: int | None = None  # max_moves_per_decision
    cooldown_ms: int | None = None  # preempted_cooldown_s
    timed: bool = False  # some option is measured in time: states keep a `Timing`
    stale_ms: dict[str, int] = field(default_factory=dict, compare=False)  # app -> stale_after, of apps with one
    changes_only: bool = False  # decisions: changes (a decision carries what it changed, not the whole pool)


def _ms(seconds: float | None) -> int:
    return round(seconds * 1000) if seconds else 0


def _rule(app: AppPolicy, tables: dict[tuple[tuple[float, float, int], ...], dict[float, int]]) -> AppRule:
    """`app`'s rule; apps with the same ranges share one table of Numbers (`tables`): a large pool's apps mostly
    share a few specs, and one table stays in the processor's cache where a thousand do not."""
    ranges = tuple(sorted((s.Metrical[0], s.Metrical[1], s.Number) for s in app.Spec))
    on_stale, fallback = app.stale_handling()
    by_integer = tables.get(ranges)
    if by_integer is None:
        by_integer = tables[ranges] = {float(m): number_in(ranges, float(m)) for m in range(METRICAL_MAX + 1)}
    return AppRule(name=app.App, key=app.App.casefold(), priority=app.Priority, min_num=app.MinNum,
                   max_num=app.MaxNum, eager=app.release == "eager", ranges=ranges, by_integer=by_integer,
                   up_ms=_ms(app.scale_up_stabilization_s), down_ms=_ms(app.scale_down_stabilization_s),
                   stale_ms=_ms(app.stale_after_s) or None, on_stale=on_stale, fallback=fallback)


def compile_policy(policy: DeciderPolicy) -> CompiledPolicy:
    tables: dict[tuple[tuple[float, float, int], ...], dict[float, int]] = {}
    rules = tuple(sorted((_rule(a, tables) for a in policy.apps), key=lambda r: r.key))
    starting = {name.casefold(): n for name, n in policy.starting_instances().items()}
    lower_than = {p: tuple(r for r in rules if r.priority > p) for p in range(1, 11)}
    not_lower = {p: tuple(r for r in rules if r.priority <= p) for p in range(1, 11)}
    return CompiledPolicy(version=policy.version, capacity=policy.capacity, starting=starting, rules=rules,
                          by_key={r.key: r for r in rules}, lower_than=lower_than, not_lower=not_lower,
                          names=tuple((r.name, r.key) for r in rules), key_of={r.name: r.key for r in rules},
                          named_as_keys=all(r.name == r.key for r in rules), source=policy,
                          observe_only=policy.observe_only, max_moves=policy.max_moves_per_decision,
                          cooldown_ms=_ms(policy.preempted_cooldown_s) or None, timed=policy.timed(),
                          stale_ms={r.key: r.stale_ms for r in rules if r.stale_ms},
                          changes_only=policy.decisions == "changes")
