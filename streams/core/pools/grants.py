"""Growth (SPEC §2): the three rounds of a grant, each only while something is still needed: free
capacity, idle donors (of any priority), preemption of lower priorities by score with largest-remainder
shares, exact fractions throughout.

Under `decisions: changes` rounds 2 and 3 read the pool's `ranks` (who could give, in order) instead of
walking its apps, wherever that gives the same decision: round 3 when every candidate's share is below one unit
(the common case, which hands one unit each to the highest scores) and the policy sets no cool-down
(`preempted_cooldown_s`); the scan decides the rest. The whole form always scans: its decisions list every
candidate's score anyway."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, MutableMapping
from fractions import Fraction
from typing import final

from schemas.decisions import Outcome, Round
from streams.core.persistent import editable, edited
from streams.core.pools.ranks import PRIORITIES, Exact, Offer, Ranks, exact
from streams.core.pools.rules import FREE, NEUTRAL, AppRule, CompiledPolicy, shown
from streams.core.pools.timing import Timing
from streams.core.pools.verdicts import (
    DeciderState,
    Idle,
    MoveRecord,
    Verdict,
    cap_note,
    decided,
    move,
    move_cap,
    reset,
)


@final
class Grant:
    """One growth decision while it is worked out: mutable inside the decision, frozen into a state after.

    A plain class, not a dataclass: compiled, a dataclass keeps the Python `__init__` the decorator wrote."""

    __slots__ = ("donors", "idle", "instances", "metricals", "moves", "need", "notes", "rule", "score_sum", "scored",
                 "scores", "timing", "used")

    def __init__(self, rule: AppRule, need: int, instances: MutableMapping[str, int],
                 metricals: MutableMapping[str, float], idle: Idle, timing: Timing | None, used: int) -> None:
        self.rule = rule
        self.need = need
        self.instances = instances  # the state's, being edited (`persistent.editable`), as are the metricals
        self.metricals = metricals
        self.idle = idle
        self.timing = timing
        self.used = used  # sum(instances.values()): what free capacity is left is capacity - used
        self.moves: list[MoveRecord] = []
        self.notes: list[str] = []
        self.scores: dict[str, float] = {}
        self.scored = 0  # how many candidates round 3 scored, and the exact sum of their scores, rounded once
        self.score_sum = 0.0
        self.donors: list[str] = []  # the keys of the apps that gave, in the order they gave

    def take(self, donor: AppRule | None, count: int, round_: Round) -> None:
        """`count` instances to the growing app, from `donor` (None: free capacity)."""
        me = self.rule
        if donor is not None:
            self.instances[donor.key] -= count
            self.donors.append(donor.key)
        else:
            self.used += count
        self.need -= count  # the growing app's instances are set once, when the rounds are done (`grow`)
        self.moves.append(move(FREE if donor is None else donor.name, me.name, count, round_))


def grow(state: DeciderState, rule: AppRule, metrical: float, metricals: MutableMapping[str, float],
          idle: Idle, number: int) -> tuple[DeciderState, Verdict]:
    """SPEC §2's three rounds, each only while something is still needed: free, idle donors, preemption.

    `metricals` are the state's with the report, being edited (`persistent.editable`)."""
    room = number if rule.max_num is None else max(0, min(number, rule.max_num - state.instances[rule.key]))
    if room == 0:
        return state.with_metricals(rule.key, edited(metricals), idle, state.timing), decided(
            "rejected", "at_max_num", f"{rule.name} wants +{number} but is at MaxNum {rule.max_num}")
    wanted = move_cap(state.policy, room)
    grant = Grant(rule, wanted, editable(state.instances), metricals, idle, state.timing, state.used)
    _from_free(state, grant)
    if grant.need:
        _from_idle(state, grant)
    if grant.need:
        _by_preemption(state, grant)
    granted = wanted - grant.need
    outcome: Outcome = "scaled" if grant.need == 0 else ("partial" if granted else "rejected")
    code = {"scaled": "granted", "partial": "partially_granted", "rejected": "no_capacity"}[outcome]
    capped = f" (capped by MaxNum {rule.max_num})" if room < number else ""
    reason = (f"{rule.name} at {shown(metrical)} wants +{wanted}{capped}{cap_note(state.policy, room, wanted)}: "
              + "; ".join(grant.notes) + f"; granted {granted}")
    if granted:
        grant.instances[rule.key] += granted
    moved = (rule.key, *grant.donors) if state.ranks is not None else ()  # only ranks need to know
    new = state.changed(moved, edited(grant.instances), edited(grant.metricals), grant.idle,
                        grant.timing, grant.used)
    return new, decided(outcome, code, reason, grant.moves, requested=wanted, granted=granted, scores=grant.scores,
                        scored=grant.scored, score_sum=grant.score_sum)


def _from_free(state: DeciderState, grant: Grant) -> None:
    """Round 1: free capacity."""
    take = min(grant.need, max(0, state.capacity - grant.used))
    if take:
        grant.take(None, take, "free")
        grant.notes.append(f"{take} from free capacity")
    else:
        grant.notes.append("no free capacity")


def _from_idle(state: DeciderState, grant: Grant) -> None:
    """Round 2: idle donors of any priority, lowest priority first, then larger surplus, then name.

    An idle app's Number is negative: it offers min(-Number, instances - MinNum), and a donor's
    metrical is reset to neutral (SPEC §2). The idle apps are kept by priority, so only the priorities that
    give are walked, the lowest first: a donor's reset changes nothing of a higher priority's offers."""
    me = grant.rule
    given: list[str] = []
    ranks = state.ranks
    for priority in range(PRIORITIES, 0, -1):
        if ranks is not None:
            if ranks.offers[priority]:
                _from_ranked(state, grant, ranks.offers[priority], given)
        elif grant.idle[priority]:
            _from_level(state, grant, priority, given)
        if not grant.need:
            break
    if given:
        grant.notes.append("idle donors gave " + ", ".join(given))
    else:
        grant.notes.append("no idle app above MinNum" + _busy(state, me, grant.metricals))


def _from_level(state: DeciderState, grant: Grant, priority: int, given: list[str]) -> None:
    """The idle donors of one priority, larger surplus first, then name, while something is needed."""
    by_key, instances, metricals, me = state.policy.by_key, grant.instances, grant.metricals, grant.rule
    numbers = grant.timing.numbers if grant.timing is not None else None  # as stabilized, under a timed policy
    offers: list[tuple[int, str]] = []  # (-offer, key): the order donors give in
    for k in grant.idle[priority]:
        if k != me.key:
            donor = by_key[k]
            number = donor.number(metricals[k]) if numbers is None else numbers[k]
            offer = min(-number, instances[k] - donor.min_num)  # `offered`, inline: the whole form's hot loop
            if offer > 0:
                offers.append((-offer, k))
    heapq.heapify(offers)  # linear; only the donors that give are popped, not all the idle apps sorted
    while offers and grant.need:
        negative_offer, key = heapq.heappop(offers)
        donor = by_key[key]
        give = min(grant.need, -negative_offer)
        grant.take(donor, give, "idle")
        metricals[donor.key] = NEUTRAL
        grant.timing, grant.idle = reset(grant.timing, donor, grant.idle)
        given.append(f"{donor.name} {give}")


def _from_ranked(state: DeciderState, grant: Grant, offers: list[Offer], given: list[str]) -> None:
    """`_from_level` from the ranks: the level's offers are already in the order donors give in."""
    by_key, me = state.policy.by_key, grant.rule
    for negative_offer, key in offers:
        if key == me.key:
            continue
        donor = by_key[key]
        give = min(grant.need, -negative_offer)
        grant.take(donor, give, "idle")
        grant.metricals[key] = NEUTRAL
        grant.timing, grant.idle = reset(grant.timing, donor, grant.idle)
        given.append(f"{donor.name} {give}")
        if not grant.need:
            break


def _by_preemption(state: DeciderState, grant: Grant) -> None:
    """Round 3: preemption of strictly lower priority, by score, largest remainder, until met; an app in its
    cool-down after a preemption (preempted_cooldown_s) is spared."""
    rule, instances, names = grant.rule, grant.instances, state.policy.by_key
    lower = state.policy.lower_than[rule.priority]
    if state.ranks is not None and lower and not state.policy.cooldown_ms:
        ranks = state.ranks
        if grant.donors:  # round 2's donors gave and were reset: they stand elsewhere now
            ranks = ranks.moved(state.policy, grant.donors, (state.instances, state.metricals, state.timing),
                                (instances, grant.metricals, grant.timing))
        if _by_rank(state, grant, ranks, lower):
            return
    candidates = [r for r in lower if instances[r.key] > r.min_num]
    if not lower:
        grant.notes.append(f"no app has lower priority than {rule.name} (P{rule.priority})")
        return
    cooling = _cooling(state.policy, grant.timing, candidates)
    if cooling:
        candidates = [r for r in candidates if r.key not in cooling]
    if not candidates:
        at_min = _some(lower) if state.policy.changes_only else ", ".join(r.name for r in lower)
        grant.notes.append("lower-priority apps are at MinNum" + (" or cooling down" if cooling else "") + ": "
                           + at_min)
        return
    metricals = grant.metricals
    scores: list[int | Fraction] = []  # by position in `candidates`, which are in key order, as rules are
    room: list[int] = []
    listed: dict[str, float] = {}
    den = 1  # the scores' common denominator: 1 while every metrical is an integer, as most are
    for r in candidates:
        score = _score(metricals[r.key], r.priority)
        if not isinstance(score, int):
            den = math.lcm(den, score.denominator)
        scores.append(score)
        room.append(instances[r.key] - r.min_num)
        listed[r.name] = float(score)
    grant.scores = listed
    weight = [int(s * den) for s in scores] if den != 1 else [int(s) for s in scores]
    if state.policy.changes_only:  # what the changes form says instead of every score
        total = sum(weight)
        grant.scored, grant.score_sum = len(candidates), float(total if den == 1 else Fraction(total, den))
    taken = [(candidates[i].key, n) for i, n in _preempt(grant.need, weight, room)]
    if state.policy.changes_only:  # the changes form lists the scores of those that gave, in the order scored
        grant.scores = {names[k].name: listed[names[k].name] for k, _ in taken}
    for key, n in taken:
        grant.take(names[key], n, "preempt")
    grant.notes.append("preempted " + ", ".join(f"{names[k].name} {n}" for k, n in taken)
                       + (" (cooling down: " + ", ".join(names[k].name for k in cooling) + ")" if cooling else ""))
    if state.policy.cooldown_ms and grant.timing is not None:
        timing = grant.timing
        grant.timing = timing._replace(preempted={**timing.preempted, **{k: timing.now for k, _ in taken}})


def _by_rank(state: DeciderState, grant: Grant, ranks: Ranks, lower: tuple[AppRule, ...]) -> bool:
    """Round 3 from the ranks, where every candidate's share is below one unit: the `need` highest scores give one
    each (`_units`), found by merging the lower priorities' lists. False where the scan must decide: some share
    would be a unit or more (few candidates)."""
    rule, names, need = grant.rule, state.policy.by_key, grant.need
    levels = [p for p in range(rule.priority + 1, PRIORITIES + 1) if ranks.above[p]]
    if not levels:
        grant.notes.append("lower-priority apps are at MinNum: " + _some(lower))
        return True
    count = 0
    total: Exact = 0
    top: Exact = 0
    heads: list[tuple[Exact, str, int, int]] = []  # (-score, key, priority, position in its list)
    for p in levels:
        level = ranks.above[p]
        count += len(level)
        total += len(level) * (100 + p * 10) - ranks.sums[p]
        best = _score(level[0][0], p)
        top = max(top, best)
        heads.append((-best, level[0][1], p, 0))
    if need * top >= total:
        return False
    heapq.heapify(heads)
    taken: list[tuple[str, Exact]] = []
    while len(taken) < need:
        negative, key, p, i = heapq.heappop(heads)
        taken.append((key, -negative))
        level = ranks.above[p]
        if i + 1 < len(level):
            heapq.heappush(heads, (-_score(level[i + 1][0], p), level[i + 1][1], p, i + 1))
    taken.sort()  # key order, as the scan hands them out
    for key, _ in taken:
        grant.take(names[key], 1, "preempt")
    grant.scores = {names[key].name: float(score) for key, score in taken}
    grant.scored, grant.score_sum = count, float(total)
    grant.notes.append("preempted " + ", ".join(f"{names[key].name} 1" for key, _ in taken))
    return True


def _some(rules: tuple[AppRule, ...], most: int = 3) -> str:
    """The first few of `rules` by name, and how many more: a changes-form reason stays the same size at any
    pool's size."""
    named = ", ".join(r.name for r in rules[:most])
    return named + (f" and {len(rules) - most} more" if len(rules) > most else "")


def _cooling(policy: CompiledPolicy, timing: Timing | None, candidates: list[AppRule]) -> list[str]:
    """Candidates preempted less than preempted_cooldown_s ago (sorted keys)."""
    if not policy.cooldown_ms or timing is None:
        return []
    return sorted(r.key for r in candidates
                  if r.key in timing.preempted and timing.now - timing.preempted[r.key] < policy.cooldown_ms)


def _busy(state: DeciderState, rule: AppRule, metricals: Mapping[str, float], most: int = 3) -> str:
    """Why the higher- or equal-priority apps gave nothing: they are not idle (the first few named)."""
    peers = state.policy.not_lower[rule.priority]  # holds `rule` itself: its priority is not lower than its own
    busy = [r for r in peers[:most + 1] if r is not rule][:most]
    if not busy:
        return ""
    named = "; ".join(f"{r.name} (P{r.priority}) is not idle at {shown(metricals[r.key])}" for r in busy)
    more = len(peers) - 1 - most
    return f" ({named}{f'; and {more} more' if more > 0 else ''})"


def _score(metrical: float, priority: int) -> int | Fraction:
    """100 - metrical + Priority * 10, exactly (higher priority and higher load give up less)."""
    return 100 + priority * 10 - exact(metrical)


def _preempt(need: int, weight: list[int], room: list[int]) -> list[tuple[int, int]]:
    """Split `need` by score with largest-remainder rounding, capped by room; repeat until met.

    Candidates are positions in key order (ties go to the smaller one, the smaller name): (position, taken)
    of those that give, in that order. Ties for a leftover unit go to the higher score, then the app name.
    Scores are exact (a float metrical is a binary fraction); `weight` holds them scaled to integers by their
    common denominator, so every share is an integer division, and comparing fractional parts is comparing
    remainders. Every pass hands out at least one unit while anyone has room, so the loop ends. `room` is
    what each can give, and is used up here.
    """
    left = room  # what each can still give
    taken = [0] * len(left)
    open_ = [i for i, n in enumerate(left) if n > 0]
    while need > 0 and open_:
        shares = _shares(need, weight, open_)
        given = 0
        for i, share in zip(open_, shares, strict=True):
            give = min(share, left[i])
            taken[i] += give
            left[i] -= give
            given += give
        need -= given
        open_ = [i for i in open_ if left[i] > 0]
    return [(i, n) for i, n in enumerate(taken) if n]


def _shares(need: int, weight: list[int], open_: list[int]) -> list[int]:
    """One pass's largest-remainder split of `need` among the positions `open_` (ascending), by weight.

    The leftover units go to the largest remainders, ties to the larger weight, then the smaller position;
    only those few are picked (`nsmallest`), the rest never sorted."""
    total = sum(weight[i] for i in open_)
    if need * max(weight[i] for i in open_) < total:  # the common case: every share under one unit
        return _units(need, weight, open_)
    shares = []
    ranked = []
    for n, i in enumerate(open_):
        share, remainder = divmod(need * weight[i], total)
        shares.append(share)
        ranked.append((-remainder, -weight[i], i, n))
    leftover = need - sum(shares)
    if leftover:
        for _, _, _, n in heapq.nsmallest(leftover, ranked):
            shares[n] += 1
    return shares


def _units(need: int, weight: list[int], open_: list[int]) -> list[int]:
    """`_shares` when every exact share is below one unit: each remainder is need * weight, so the `need`
    leftover units go to the largest weights, ties to the smaller position.

    One pass keeps the best `need` so far, sorted (`heapq.nsmallest` would do it in Python, not compiled): a
    later position ties with none of them, so it enters only with a larger weight than the last one's."""
    best: list[tuple[int, int]] = []  # (-weight, n), ascending: the last is the one to drop
    for n, i in enumerate(open_):
        w = weight[i]
        if len(best) < need:
            bisect.insort(best, (-w, n))
        elif -w < best[-1][0]:
            best.pop()
            bisect.insort(best, (-w, n))
    shares = [0] * len(open_)
    for _, n in best:
        shares[n] = 1
    return shares
