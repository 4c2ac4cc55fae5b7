"""The persistent heap of sorted runs: everything pushed comes out once, in order, old versions intact."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.core.dispatch.heap import Heap, Node, advance, entries, merge, of_sorted, pop, push, push_run

keys = st.lists(st.integers(0, 50), max_size=30)


def drain(heap: Heap) -> list[tuple[int, int]]:
    out = []
    while heap is not None:
        item = heap.item
        if len(item) == 4:  # a run entry: (key, id, run, index)
            out.append(item[:2])
            heap = advance(heap)
        else:
            out.append(item)
            heap = pop(heap)
    return out


@given(st.lists(keys, max_size=8), keys)
def test_runs_and_single_entries_come_out_sorted_and_once(runs: list[list[int]], singles: list[int]) -> None:
    heap: Heap = None
    pushed, n = [], 0
    for run in runs:
        entries = tuple(sorted((k, (n := n + 1)) for k in run))
        heap = push_run(heap, entries)
        pushed.extend(entries)
    for k in singles:
        n += 1
        heap = push(heap, (k, n))
        pushed.append((k, n))
    before = heap
    assert drain(heap) == sorted(pushed)
    assert drain(before) == sorted(pushed)  # draining made new versions only: the old heap is whole


@given(keys, keys)
def test_a_heap_built_from_sorted_entries_takes_pushes_and_lists_every_entry(built: list[int], more: list[int]) -> None:
    items = sorted((k, i) for i, k in enumerate(built))
    heap = of_sorted(items)
    for i, k in enumerate(more):
        heap = push(heap, (k, len(built) + i))
    everything = items + [(k, len(built) + i) for i, k in enumerate(more)]
    assert sorted(entries(heap)) == sorted(everything)
    assert drain(heap) == sorted(everything)


@given(keys, st.lists(st.booleans(), max_size=30))
def test_a_push_makes_the_heap_a_merge_with_one_node_makes(pushed: list[int], pops: list[bool]) -> None:
    """`push` walks the right spine itself: node for node the heap `merge` makes (ties included), so the queues'
    shapes, and the order of equal entries, are what they were."""
    mine: Heap = None
    merged: Heap = None
    for i, k in enumerate(pushed):
        mine, merged = push(mine, (k % 7, 0)), merge(merged, Node(1, (k % 7, 0), None, None))
        assert mine == merged
        if i < len(pops) and pops[i] and mine is not None and merged is not None:
            mine, merged = pop(mine), pop(merged)
