"""A persistent priority queue (a leftist heap): push and pop in O(log n), old versions untouched.

The dispatcher's state is frozen like every fold's, so a queue of 100,000 pending jobs cannot be
copied per record; a leftist heap shares all but O(log n) nodes between versions. Entries are
tuples ordered by their first fields; removed jobs are not searched for but skipped when they
reach the top (the fold checks each top against the job it names).

A sorted run (the jobs of one assign, already in start order) enters a queue as one entry, not
one per job: the entry `(*run[i], run, i)` stands for `run[i:]`, and `advance` replaces it by the
next of its run. A queue's size is then its number of runs, and an assign of 10,000 jobs costs
one push.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, final


@final
class Node:
    """A heap node: frozen by convention (never changed once built; a change builds new nodes). A plain class,
    not a named tuple: compiled, it is built and read natively, and every push and pop builds several."""

    __slots__ = ("item", "left", "rank", "right")

    def __init__(self, rank: int, item: tuple[Any, ...], left: Node | None, right: Node | None) -> None:
        self.rank = rank  # length of the right spine: the merge walks only right spines
        self.item = item
        self.left = left
        self.right = right

    def __eq__(self, other: object) -> bool:
        """The same tree of the same entries (as the named tuple it was compared): iterative, as a heap loaded
        from sorted entries is a chain as long as the queue."""
        if not isinstance(other, Node):
            return NotImplemented
        stack: list[tuple[Node | None, Node | None]] = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b:
                continue
            if a is None or b is None or a.rank != b.rank or a.item != b.item:
                return False
            stack.append((a.left, b.left))
            stack.append((a.right, b.right))
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Node({self.rank!r}, {self.item!r}, {self.left!r}, {self.right!r})"


Heap = Node | None


def merge(a: Heap, b: Heap) -> Heap:
    """The two heaps as one: down the right spines taking the smaller top each step, then back up,
    each node rebuilt with its deeper-ranked child on the left (a loop: no Python call per level)."""
    spine: list[Node] = []
    while a is not None and b is not None:
        if b.item < a.item:
            a, b = b, a
        spine.append(a)
        a = a.right
    merged = a if b is None else b
    return _rebuilt(spine, merged) if merged is not None else None


def _rebuilt(spine: list[Node], merged: Node) -> Node:
    """Back up the right spine walked down (emptying it), each node over `merged` so far, its deeper-ranked child
    on the left."""
    while spine:  # not `reversed(spine)`: mypyc 2.4 fails on it for a NamedTuple holding Any
        node = spine.pop()
        # no swap of two variables narrowed differently: mypyc types each by its first assignment
        if node.left is None or node.left.rank < merged.rank:
            left, right = merged, node.left
        else:
            left, right = node.left, merged
        merged = Node(1 if right is None else right.rank + 1, node.item, left, right)
    return merged


def entries(heap: Heap) -> Iterator[tuple[Any, ...]]:
    """Every entry, in no order (to rebuild a queue without its stale entries)."""
    stack = [heap]
    while stack:
        node = stack.pop()
        if node is not None:
            yield node.item
            stack += (node.left, node.right)


def of_sorted(items: list[tuple[Any, ...]]) -> Heap:
    """A heap of `items`, already sorted ascending, in O(n): each node the parent of the rest as its left
    child (a chain with empty right spines is a leftist heap, and popping it costs O(1))."""
    heap: Heap = None
    for i in range(len(items) - 1, -1, -1):  # as above, not `reversed(items)`
        heap = Node(1, items[i], heap, None)
    return heap


def push(heap: Heap, item: tuple[Any, ...]) -> Heap:
    """`heap` with `item`: `merge` with a one-node heap, without its swaps (every start pushes twice). Down
    the right spine past the entries not above `item`; its node takes the rest of the spine as its left
    child, then the spine is rebuilt as `merge` rebuilds it, so the heap is the very one `merge` makes."""
    spine: list[Node] = []
    while heap is not None and not item < heap.item:
        spine.append(heap)
        heap = heap.right
    return _rebuilt(spine, Node(1, item, heap, None))


def pop(heap: Node) -> Heap:
    """The heap without its top (`heap.item`)."""
    return merge(heap.left, heap.right)


def push_run(heap: Heap, run: tuple[tuple[Any, ...], ...]) -> Heap:
    """`heap` with `run` (sorted ascending) as one entry."""
    return push(heap, (*run[0], run, 0)) if run else heap


def advance(heap: Node) -> Heap:
    """The heap without its top run entry's first element: the next of its run takes its place."""
    *_, run, index = heap.item
    index += 1
    if index == len(run):
        return pop(heap)
    item = (*run[index], run, index)
    left, right = heap.left, heap.right
    if (left is None or item <= left.item) and (right is None or item <= right.item):
        return Node(heap.rank, item, left, right)  # still the smallest: the top is replaced in place
    return push(pop(heap), item)
