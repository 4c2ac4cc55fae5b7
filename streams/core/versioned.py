"""A persistent map in buckets whose newest version is read and changed at a dict's cost, whatever its size.

A dispatcher namespace holds up to 100,000 jobs, and each command reads and changes a few of them at
random. In a hash array mapped trie (`persistent`, `buckets.Buckets`) each of those costs a path of
nodes that, at that size, the processor's caches no longer hold: the trie's five operations of a
finish cost 1.1 us more at 100,000 jobs than at 1,000 (a dict's, 0.1 us more), most of what makes a
command slower in a larger namespace (`bench/dispatch_fold.py`).

So every version of a map shares one store of dicts (a `_Store`), which holds the items of one
version, the one read last; every other version holds the changes that take the version nearer the
store's to itself (a version tree rerooted on access: Baker's "shallow binding", as in Conchon and
Filliâtre's persistent arrays). A fold reads and changes the version it was just given, which is the
store's, at a dict's cost; reading an older version (an explanation's state before a record) first
undoes the changes between them, and the later version is then the one that holds changes. Every
version reads as the same items whatever was read in between, so it is as persistent as the trie:
only the cost of going back differs, and a version held while the map moves on keeps every change
since in memory (the worker keeps only each key's newest state; an explanation, the state before
one record).

The items' order is not kept: `keys`, `values` and `items` come in an order that depends on what was
read before, so a fold that needs an order sorts (the dispatcher's do: by start order, by name). Only
one thread may use a store's versions (the worker's loop; each replay process has its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Generic, TypeVar, final

V = TypeVar("V")


@final
class _Absent:
    """No item (a change's value where the key was not held)."""

    __slots__ = ()


ABSENT: Final = _Absent()
Change = tuple[str, str, Any]  # (bucket, key, the value it had: ABSENT if none)


@final
class _Store:
    """The items of one version, as bucket -> key -> value (a bucket is dropped with its last item)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, dict[str, Any]]) -> None:
        self.data = data


def _write(data: dict[str, dict[str, Any]], name: str, key: str, value: Any) -> Any:
    """Set (ABSENT: remove) one item; the value it had, or ABSENT."""
    bucket = data.get(name)
    if bucket is None:
        if value is ABSENT:
            return ABSENT
        data[name] = {key: value}
        return ABSENT
    old = bucket.get(key, ABSENT)
    if value is ABSENT:
        if old is not ABSENT:
            del bucket[key]
            if not bucket:
                del data[name]
    else:
        bucket[key] = value
    return old


@final
class Versioned(Generic[V]):
    """Keys to values, in buckets by `of(key)`; persistent: every change returns a new version, and every version
    keeps its items. The interface of `buckets.Buckets` (`touched`: the buckets changed since `untouched`).

    A version is either its store's (`changes` None) or holds the changes that, undone in reverse order, take
    `newer` to it."""

    __slots__ = ("changes", "count", "newer", "of", "store", "touched")

    def __init__(self, of: Callable[[str], str], store: _Store | None = None, count: int = 0,
                 touched: frozenset[str] = frozenset()) -> None:
        self.of = of
        self.store = _Store({}) if store is None else store
        self.count = count
        self.touched = touched
        self.changes: list[Change] | None = None
        self.newer: Versioned[V] | None = None

    @classmethod
    def of_items(cls, of: Callable[[str], str], items: Iterable[tuple[str, V]]) -> Versioned[V]:
        data: dict[str, dict[str, Any]] = {}
        count = 0
        for key, value in items:
            bucket = data.setdefault(of(key), {})
            count += key not in bucket
            bucket[key] = value
        return cls(of, _Store(data), count)

    def _data(self) -> dict[str, dict[str, Any]]:
        """The store, made to hold this version's items: the changes on the way from the store's version are undone,
        and each version passed holds the changes that redo them."""
        if self.changes is None:
            return self.store.data
        path: list[Versioned[V]] = []
        version: Versioned[V] | None = self
        while version is not None and version.changes is not None:
            path.append(version)
            version = version.newer
        data = self.store.data
        while path:  # from the version next to the store's back to this one
            older = path.pop()
            changes, newer = older.changes, older.newer
            assert changes is not None and newer is not None
            redo: list[Change] = []
            for at in range(len(changes) - 1, -1, -1):
                name, key, value = changes[at]
                redo.append((name, key, _write(data, name, key, value)))
            newer.changes, newer.newer = redo, older
            older.changes, older.newer = None, None
        return data

    def _next(self, count: int, changes: list[Change], touched: frozenset[str]) -> Versioned[V]:
        """The version after this one, made the store's: this one now holds `changes` (already written)."""
        after: Versioned[V] = Versioned(self.of, self.store, count, touched)
        self.changes, self.newer = changes, after
        return after

    def get(self, key: str) -> V | None:
        return self.get_in(self.of(key), key)

    def get_in(self, name: str, key: str) -> V | None:
        """`get(key)` where `name` is `of(key)`, already known."""
        bucket = self._data().get(name)
        return None if bucket is None else bucket.get(key)

    def __getitem__(self, key: str) -> V:
        return self._data()[self.of(key)][key]  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        bucket = self._data().get(self.of(key))
        return bucket is not None and key in bucket

    def __len__(self) -> int:
        return self.count

    def snapshot(self) -> dict[str, dict[str, V]]:
        """A copy of this version's items, bucket by bucket."""
        return {name: dict(bucket) for name, bucket in self._data().items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Versioned):
            return False
        return self.count == other.count and (self is other or self.snapshot() == other.snapshot())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Versioned({dict(sorted(self.items()))!r})"

    def keys(self) -> Iterator[str]:
        return iter([key for bucket in self._data().values() for key in bucket])

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def values(self) -> Iterator[V]:
        return iter([value for bucket in self._data().values() for value in bucket.values()])

    def items(self) -> Iterator[tuple[str, V]]:
        return iter([item for bucket in self._data().values() for item in bucket.items()])

    def names(self) -> list[str]:
        """The buckets that hold an item, sorted."""
        return sorted(self._data())

    def bucket(self, name: str) -> list[tuple[str, V]]:
        """One bucket's items by key (empty once its last item is gone): what its table entry holds."""
        return sorted((self._data().get(name) or {}).items())

    def in_bucket(self, name: str) -> list[V]:
        """One bucket's values, in no order."""
        return list((self._data().get(name) or {}).values())

    def set(self, key: str, value: V) -> Versioned[V]:
        if not self.count:  # a new store: versions of the empty map (`NO_JOBS`) are many maps' start
            name = self.of(key)
            return Versioned(self.of, _Store({name: {key: value}}), 1, self.touched.union((name,)))
        data = self._data()
        name = self.of(key)
        old = _write(data, name, key, value)
        return self._next(self.count + (old is ABSENT), [(name, key, old)], self.touched.union((name,)))

    def added(self, items: Iterable[tuple[str, V]]) -> Versioned[V]:
        """With every one of `items` set, in one version."""
        items = list(items)  # taken whole before the store changes: reading them may read a version of it, or fail
        if not self.count:
            fresh = Versioned.of_items(self.of, items)
            fresh.touched = self.touched.union(fresh.store.data)
            return fresh
        data, count, changes = self._data(), self.count, []
        for key, value in items:
            name = self.of(key)
            old = _write(data, name, key, value)
            count += old is ABSENT
            changes.append((name, key, old))
        return self._next(count, changes, self.touched.union([name for name, _, _ in changes]))

    def delete(self, key: str) -> Versioned[V]:
        """Without `key`, which must be present (KeyError otherwise)."""
        data = self._data()
        name = self.of(key)
        if key not in (data.get(name) or {}):
            raise KeyError(key)
        old = _write(data, name, key, ABSENT)
        return self._next(self.count - 1, [(name, key, old)], self.touched.union((name,)))

    def untouched(self) -> Versioned[V]:
        """The same items with nothing touched yet (a record begins)."""
        if not self.touched:
            return self
        self._data()  # this version made the store's, which `_next` moves on from
        return self._next(self.count, [], frozenset())
