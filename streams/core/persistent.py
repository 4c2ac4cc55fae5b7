"""The core's persistent collection library: immutables' `Map`, a hash array mapped trie in C (the
dispatcher's jobs, read at random among up to 100,000 by every command, are a `versioned.Versioned`).

A record changes a few entries of a state that can hold 100,000 jobs, and the state before it must stay as it
was (replay, explain and the worker's keeper read both), so a change copies a path of the trie, not the map.
pyrsistent's maps and sets, which the groups fold used before, were measured beside it: about ten times slower
to change and a hundred times slower to look up, and the groups fold costs 1.4-2x less with `Map`
(`bench/groups_fold.py`, the performance history). A set is a `Map` whose values are all None; the helpers
below give it a set's operations.

A pool's apps (`streams.core.pools`) are a `Map` under `decisions: changes` and a dict, copied per change,
under the whole form, whose every decision lists every app anyway: `editable`, `edited` and `updated` serve
both, so a fold reads and changes either the same way.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, MutableMapping
from typing import Any, TypeVar

from immutables import Map

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
PSet = Map[K, None]  # a persistent set: its members are the keys

EMPTY: Map[Any, Any] = Map()


def set_of(items: Iterable[K]) -> Map[K, None]:
    return Map(dict.fromkeys(items))


def added(members: Map[K, None], item: K) -> Map[K, None]:
    return members.set(item, None)


def without(mapping: Map[K, V], key: K) -> Map[K, V]:
    """`mapping` without `key` (a set without a member), whether or not it has it."""
    return mapping.delete(key) if key in mapping else mapping


def joined(members: Map[K, None], items: Iterable[K]) -> Map[K, None]:
    """The union of a set and `items`."""
    changing = members.mutate()
    for item in items:
        changing[item] = None
    return changing.finish()


def less(members: Map[K, None], items: Iterable[K]) -> Map[K, None]:
    """The set without `items`."""
    changing = members.mutate()
    for item in items:
        if item in changing:
            del changing[item]
    return changing.finish()


def editable(mapping: Mapping[K, V]) -> MutableMapping[K, V]:
    """A copy of `mapping` to change while a decision is worked out: a mutation of a `Map` (a path copied per
    change), a dict's copy otherwise. `edited` makes it a mapping of the first's kind again."""
    if isinstance(mapping, Map):
        return mapping.mutate()  # type: ignore[return-value]  # the stubs' MapMutation is no MutableMapping
    return dict(mapping)


def edited(editing: MutableMapping[K, V]) -> Mapping[K, V]:
    if isinstance(editing, dict):
        return editing
    return editing.finish()  # type: ignore[attr-defined, no-any-return]  # a MapMutation (`editable`)


def updated(mapping: Mapping[K, V], key: K, value: V) -> Mapping[K, V]:
    """`mapping` with `key` set to `value`, of `mapping`'s kind (`Map.set`, a dict's copy)."""
    if isinstance(mapping, Map):
        return mapping.set(key, value)
    return {**mapping, key: value}
