"""A persistent priority queue (a leftist heap): push and pop in O(log n), old versions untouched.

The dispatcher's state is frozen like every fold's, so a queue of 100,000 pending jobs cannot be
copied per record; a leftist heap shares all but O(log n) nodes between versions. Entries are
tuples ordered by their first fields; removed jobs are not searched for but skipped when they
reach the top (the fold checks each top against the job it names).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple


class Node(NamedTuple):
    rank: int  # length of the right spine: the merge walks only right spines
    item: tuple[Any, ...]
    left: Node | None
    right: Node | None


Heap = Node | None


def merge(a: Heap, b: Heap) -> Heap:
    if a is None:
        return b
    if b is None:
        return a
    if b.item < a.item:
        a, b = b, a
    right = merge(a.right, b)
    left = a.left
    assert right is not None
    if left is None or left.rank < right.rank:
        left, right = right, left
    return Node((right.rank if right is not None else 0) + 1, a.item, left, right)


def push(heap: Heap, item: tuple[Any, ...]) -> Heap:
    return merge(heap, Node(1, item, None, None))


def pop(heap: Node) -> Heap:
    """The heap without its top (`heap.item`)."""
    return merge(heap.left, heap.right)


def items(heap: Heap) -> Iterator[tuple[Any, ...]]:
    """Every entry, in no particular order."""
    stack = [heap]
    while stack:
        node = stack.pop()
        if node is not None:
            yield node.item
            stack.append(node.left)
            stack.append(node.right)
