"""Splitting a job set's tasks 1..T over its live nodes: the strategies, and comparing two plans.

A plan is a pure function of (live nodes with their addresses, T, strategy): no history, so the
same live set always gets the same ranges, and replay or an auditor recomputes any epoch from its
inputs alone. Ranges are inclusive `(first, last)` pairs, ascending per node; every live node has
an entry, possibly empty.

* `scope` (the seed's, SPEC §6): nodes sorted by address (ties by id), `avg = T // L`, node k
  owns `k*avg + 1 .. (k+1)*avg` and the last node up to T. A join or loss shifts every boundary
  after it, so about half the tasks move.
* `ring` (consistent hashing): each node hashes to `POINTS` places on a ring of 2**64, task t sits
  at `(t-1) * 2**64 // T`, and a task belongs to the first node place at or after it. A joining
  node takes only arcs (moves only to it: about T/(L+1) tasks), a lost node's arcs go only to the
  nodes after them; the arcs are contiguous task ranges, so a plan costs O(L log L), not O(T).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

Range = tuple[int, int]
Span = Sequence[int]  # a range as a plan record holds it too (a JSON list): typed so, compiled code accepts both
Ranges = Mapping[str, Sequence[Span]]
STRATEGIES = ("scope", "ring")
POINTS = 64  # ring places per node: a node's share is within about 1/sqrt(POINTS) of T/L
_RING = 1 << 64


def plan(strategy: str, nodes: Mapping[str, str], tasks: int) -> dict[str, tuple[Range, ...]]:
    """Each live node's task ranges (node -> ranges; ascending nodes)."""
    if strategy == "scope":
        return scope(nodes, tasks)
    if strategy == "ring":
        return ring(nodes, tasks)
    raise ValueError(f"unknown strategy {strategy!r}")


def scope(nodes: Mapping[str, str], tasks: int) -> dict[str, tuple[Range, ...]]:
    order = sorted(nodes, key=lambda node: (nodes[node], node))
    count = len(order)
    avg = tasks // count if count else 0
    ranges: dict[str, tuple[Range, ...]] = {}
    for k, node in enumerate(order):
        first, last = k * avg + 1, tasks if k == count - 1 else (k + 1) * avg
        ranges[node] = ((first, last),) if first <= last else ()
    return dict(sorted(ranges.items()))


def point(node: str, index: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{node}#{index}".encode(), digest_size=8).digest(), "big")


def ring(nodes: Mapping[str, str], tasks: int) -> dict[str, tuple[Range, ...]]:
    owned: dict[str, list[Range]] = {node: [] for node in sorted(nodes)}
    if not owned or tasks == 0:
        return {node: () for node in owned}
    places = sorted((point(node, i), node) for node in owned for i in range(POINTS))

    def upto(place: int) -> int:
        """How many tasks sit at or before `place`: t with (t-1) * 2**64 // T <= place."""
        return min(tasks, -(-(place + 1) * tasks // _RING))

    before = 0
    for place, node in places:
        through = upto(place)
        if through > before:
            owned[node].append((before + 1, through))
            before = through
    if before < tasks:  # past the last place: the ring wraps to the first
        owned[places[0][1]].append((before + 1, tasks))
    return {node: tuple(_merged(sorted(spans))) for node, spans in owned.items()}


def _merged(spans: Iterable[Range]) -> list[Range]:
    out: list[Range] = []
    for first, last in spans:
        if out and out[-1][1] + 1 == first:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def segments(ranges: Ranges) -> list[tuple[int, int, str]]:
    """Every range of a plan with its owner, ascending by first task."""
    return sorted((first, last, node) for node, spans in ranges.items() for first, last in spans)


def changes(before: Ranges, after: Ranges) -> list[tuple[int, int, str, str]]:
    """(first, last, old owner, new owner) for every stretch of tasks owned in both plans by different nodes."""
    old, new = segments(before), segments(after)
    out: list[tuple[int, int, str, str]] = []
    i = j = 0
    while i < len(old) and j < len(new):
        first, last = max(old[i][0], new[j][0]), min(old[i][1], new[j][1])
        if first <= last and old[i][2] != new[j][2]:
            out.append((first, last, old[i][2], new[j][2]))
        if old[i][1] < new[j][1]:
            i += 1
        else:
            j += 1
    return out


def moved(before: Ranges, after: Ranges) -> int:
    """Tasks whose owner changed (tasks new to the set, or gone from it, are not counted)."""
    return sum(last - first + 1 for first, last, _, _ in changes(before, after))


def owns(ranges: Iterable[Span], task: int) -> bool:
    return any(first <= task <= last for first, last in ranges)


def size(ranges: Iterable[Span]) -> int:
    return sum(last - first + 1 for first, last in ranges)
