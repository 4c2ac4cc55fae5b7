"""Who could give, kept in order as a pool changes: under `decisions: changes` a growth finds its donors
without walking the pool (issue 49: a decision's cost grows with what it changes, not with the pool).

Per priority, two sorted lists: the idle apps that offer instances, the largest offer first, then the key (the
order round 2 takes them in), and the apps above MinNum by metrical, the lowest first, then the key (round 3's
candidates: within one priority the lowest metrical has the highest score), with the exact sum of the latter's
metricals, so that the sum of every candidate's score is a few multiplications. A change of a few apps moves
their entries: a bisect in one level's list, copied (a few hundred pointers at the largest pools), never the
pool. `Ranks.of` builds them from scratch; a property test holds every fold's ranks equal to it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, Final, final

from streams.core.frozen import Frozen
from streams.core.pools.rules import AppRule, CompiledPolicy
from streams.core.pools.timing import Timing

PRIORITIES = 10  # a policy's priorities are 1 (the highest) to 10

Offer = tuple[int, str]  # (-offer, key): ascending is round 2's order
Above = tuple[float, str]  # (metrical, key): ascending is round 3's, within one priority
Entries = tuple[Offer | None, Above | None]  # an app's entries in the lists, if any
Exact = int | Fraction  # a sum of metricals, exactly


def offered(rule: AppRule, instances: int, number: int) -> int:
    """What an idle app offers: min(-Number, instances - MinNum); 0 unless its Number is negative."""
    return max(0, min(-number, instances - rule.min_num)) if number < 0 else 0


def exact(metrical: float) -> Exact:
    """A metrical as an exact number: an int for the integer scores most reports carry."""
    return int(metrical) if metrical.is_integer() else Fraction(metrical)


def number_of(rule: AppRule, metricals: Mapping[str, float], timing: Timing | None) -> int:
    """The Number `rule`'s app stands at: its metrical's, or as stabilized and stale handling left it."""
    return rule.number(metricals[rule.key]) if timing is None else timing.numbers[rule.key]


def _entries(rule: AppRule, instances: Mapping[str, int], metricals: Mapping[str, float],
             timing: Timing | None) -> Entries:
    """`rule`'s app's entries in the lists, standing as `instances`, `metricals` and `timing` say."""
    key, count = rule.key, instances[rule.key]
    if count <= rule.min_num:
        return None, None  # at MinNum: neither a candidate nor offering
    offer = offered(rule, count, number_of(rule, metricals, timing))
    return (-offer, key) if offer > 0 else None, (metricals[key], key)


@final
class Ranks(Frozen):
    """The lists of one pool, by priority (index 1 to `PRIORITIES`; 0 stays empty). Never changed once built:
    `moved` copies the levels it changes.

    They always stand for the state that holds them: every change of an app's instances, metrical or Number
    goes through `DeciderState.changed`, which moves its entries (found from the state before, as they were
    made from it)."""

    __slots__ = ("above", "offers", "sums")

    def __init__(self, offers: tuple[list[Offer], ...], above: tuple[list[Above], ...], sums: tuple[Exact, ...]
                 ) -> None:
        self.offers: Final = offers
        self.above: Final = above
        self.sums: Final = sums  # the exact sum of the metricals in `above`, by priority

    def _fields(self) -> tuple[object, ...]:
        return (self.offers, self.above, self.sums)

    @staticmethod
    def of(policy: CompiledPolicy, instances: Mapping[str, int], metricals: Mapping[str, float],
           timing: Timing | None) -> Ranks:
        offers: list[list[Offer]] = [[] for _ in range(PRIORITIES + 1)]
        above: list[list[Above]] = [[] for _ in range(PRIORITIES + 1)]
        sums: list[Exact] = [0] * (PRIORITIES + 1)
        for rule in policy.rules:
            offer, up = _entries(rule, instances, metricals, timing)
            if offer is not None:
                offers[rule.priority].append(offer)
            if up is not None:
                above[rule.priority].append(up)
                sums[rule.priority] += exact(up[0])
        for offering in offers:
            offering.sort()
        for standing in above:
            standing.sort()
        return Ranks(tuple(offers), tuple(above), tuple(sums))

    def moved(self, policy: CompiledPolicy, keys: Iterable[str],
              before: tuple[Mapping[str, int], Mapping[str, float], Timing | None],
              after: tuple[Mapping[str, int], Mapping[str, float], Timing | None]) -> Ranks:
        """These ranks, of a state standing as `before` (its instances, metricals and timing), after the apps of
        `keys` came to stand as `after` says."""
        offers: list[list[Offer]] | None = None  # the levels, copied at the first change of one
        above: list[list[Above]] | None = None
        sums: list[Exact] | None = None
        seen: set[str] = set()
        for key in keys:
            if key in seen:
                continue
            seen.add(key)
            rule = policy.by_key[key]
            p = rule.priority
            was = _entries(rule, before[0], before[1], before[2])
            now = _entries(rule, after[0], after[1], after[2])
            if now[0] != was[0]:
                if offers is None:
                    offers = list(self.offers)
                if offers[p] is self.offers[p]:  # a level is copied once a change, before its first edit
                    offers[p] = list(offers[p])
                _swap(offers[p], was[0], now[0])
            if now[1] != was[1]:
                if above is None or sums is None:
                    above, sums = list(self.above), list(self.sums)
                if above[p] is self.above[p]:
                    above[p] = list(above[p])
                _swap(above[p], was[1], now[1])
                if was[1] is not None:
                    sums[p] -= exact(was[1][0])
                if now[1] is not None:
                    sums[p] += exact(now[1][0])
        if offers is None and above is None:
            return self
        return Ranks(self.offers if offers is None else tuple(offers), self.above if above is None else tuple(above),
                     self.sums if sums is None else tuple(sums))


def _swap(level: list[Any], was: tuple[Any, str] | None, now: tuple[Any, str] | None) -> None:
    """`level` (a copy of this change's own) without the entry `was` and with `now`."""
    if was is not None:
        at = bisect.bisect_left(level, was)
        if at == len(level) or level[at] != was:  # the ranks no longer stand for their state: fail here, not later
            raise AssertionError(f"{was!r} is not ranked")
        del level[at]
    if now is not None:
        bisect.insort(level, now)
