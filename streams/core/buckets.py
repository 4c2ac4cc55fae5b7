"""A persistent map kept in buckets, which knows which buckets the current record changed.

A fold whose state holds many named things (a dispatcher namespace's jobs, a scheduler group's
owners) stores them in the worker's tables one bucket per entry (`folds.Parts`): Kafka takes at
most 1 MB a request, and rewriting every job after every record costs what the state holds, not
what the record changed. The fold clears `touched` when a record begins (`untouched`); `changed`
tells the worker which buckets to write.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from immutables import Map
from mypy_extensions import mypyc_attr

from streams.core.versioned import Versioned

V = TypeVar("V")
EMPTY: Map[str, Any] = Map()
PER_BUCKET = 32  # items a `Hashed` bucket holds on average at most: one table entry of about a kilobyte
MAX_BITS = 16


class Hashed:
    """Bucket names by CRC-32 of the key (keys are any text, so not a prefix): 2**bits buckets, as many as
    the map needs (`fitting`), named `bits.index` so that the buckets of two sizes never share a name."""

    __slots__ = ("bits",)

    def __init__(self, bits: int = 0) -> None:
        self.bits = bits

    def __call__(self, key: str) -> str:
        return f"{self.bits}.{zlib.crc32(key.encode('utf-8', 'surrogatepass')) & ((1 << self.bits) - 1):x}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hashed) and other.bits == self.bits

    __hash__ = None  # type: ignore[assignment]

    def names(self) -> list[str]:
        return [f"{self.bits}.{i:x}" for i in range(1 << self.bits)]

    def fits(self, count: int) -> bool:
        """Whether `count` items fill these buckets neither over `PER_BUCKET` nor under an eighth of it, on
        average (the slack keeps a map at the edge from being re-bucketed back and forth)."""
        return count <= PER_BUCKET << self.bits and (self.bits == 0 or 8 * count >= PER_BUCKET << self.bits)

    @staticmethod
    def fitting(count: int) -> Hashed:
        bits = 0
        while count > PER_BUCKET << bits and bits < MAX_BITS:
            bits += 1
        return Hashed(bits)


def refitted(of: Callable[[str], str], count: int) -> Hashed | None:
    """Buckets for `count` items, or None while `of`'s fit them (or are as many as there may be)."""
    if isinstance(of, Hashed) and of.fits(count):
        return None
    fit = Hashed.fitting(count)
    return None if fit == of else fit


@mypyc_attr(native_class=False)  # mypyc compiles no subclass of a builtin type but this kind
class Unwritten(frozenset[str]):
    """`touched` of a map loaded from a layout that did not store its buckets (an older entry that held
    them inline): `changed` names them all after the next record, whatever that record touched."""


class Buckets(Generic[V]):
    """Keys to values, in buckets by `of(key)`. Persistent: every change returns a new `Buckets`.

    Two maps are equal when they hold the same items in the same buckets: what a record touched is
    not the state.
    """

    __slots__ = ("buckets", "count", "of", "touched")

    def __init__(self, of: Callable[[str], str], buckets: Map[str, Map[str, V]] = EMPTY, count: int = 0,
                 touched: frozenset[str] = frozenset()) -> None:
        self.of, self.buckets, self.count, self.touched = of, buckets, count, touched

    @classmethod
    def of_items(cls, of: Callable[[str], str], items: Iterable[tuple[str, V]], unwritten: bool = False) -> Buckets[V]:
        """A map holding `items`; `unwritten`: loaded from a layout that did not store its buckets."""
        grouped: dict[str, dict[str, V]] = {}
        for key, value in items:
            grouped.setdefault(of(key), {})[key] = value
        touched = Unwritten(grouped) if unwritten else frozenset()
        return cls(of, Map({name: Map(b) for name, b in grouped.items()}), sum(map(len, grouped.values())), touched)

    def _with(self, buckets: Map[str, Map[str, V]], count: int, names: Iterable[str]) -> Buckets[V]:
        return Buckets(self.of, buckets, count, self.touched.union(names))

    def get(self, key: str) -> V | None:
        bucket = self.buckets.get(self.of(key))
        return None if bucket is None else bucket.get(key)

    def __getitem__(self, key: str) -> V:
        return self.buckets[self.of(key)][key]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        bucket = self.buckets.get(self.of(key))
        return bucket is not None and key in bucket

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Buckets) and self.count == other.count and self.buckets == other.buckets

    __hash__ = None  # type: ignore[assignment]

    def keys(self) -> Iterator[str]:
        for bucket in self.buckets.values():
            yield from bucket.keys()

    def __iter__(self) -> Iterator[str]:  # not `__iter__ = keys`: a compiled (mypyc) class takes no alias
        return self.keys()

    def values(self) -> Iterator[V]:
        for bucket in self.buckets.values():
            yield from bucket.values()

    def items(self) -> Iterator[tuple[str, V]]:
        for bucket in self.buckets.values():
            yield from bucket.items()

    def set(self, key: str, value: V) -> Buckets[V]:
        name = self.of(key)
        bucket = self.buckets.get(name) or EMPTY
        count = self.count if key in bucket else self.count + 1
        return self._with(self.buckets.set(name, bucket.set(key, value)), count, (name,))

    def added(self, items: Iterable[tuple[str, V]]) -> Buckets[V]:
        """With every one of `items` set, in one pass."""
        count, names = self.count, set()
        with self.buckets.mutate() as buckets:
            for key, value in items:
                name = self.of(key)
                bucket = buckets.get(name) or EMPTY
                count += key not in bucket
                buckets[name] = bucket.set(key, value)
                names.add(name)
            done = buckets.finish()
        return self._with(done, count, names)

    def delete(self, key: str) -> Buckets[V]:
        """Without `key`, which must be present."""
        name = self.of(key)
        bucket = self.buckets[name].delete(key)
        return self._with(self.buckets.set(name, bucket) if bucket else self.buckets.delete(name), self.count - 1,
                          (name,))

    def rebucketed(self, of: Hashed) -> Buckets[V]:
        """The same items in the buckets of `of`, every one of which is touched: an empty one is written empty,
        so that no entry left from an earlier time at this size is read. The old buckets are left as they are
        (never read while the map has another size), so a crash between two writes never empties a bucket
        that the stored size still names."""
        moved = Buckets.of_items(of, self.items())
        return Buckets(of, moved.buckets, moved.count, self.touched.union(of.names()))

    def untouched(self) -> Buckets[V]:
        """The same items with nothing touched yet (a record begins)."""
        return Buckets(self.of, self.buckets, self.count) if self.touched else self

    def bucket(self, name: str) -> list[tuple[str, V]]:
        """One bucket's items by key (empty once its last item is gone): what its table entry holds."""
        return sorted((self.buckets.get(name) or EMPTY).items())


def changed(before: Buckets[Any] | Versioned[Any], after: Buckets[Any] | Versioned[Any]) -> frozenset[str]:
    """The buckets to write after a record took `before` to `after` (and every bucket of a map still `Unwritten`:
    the worker gathers the names until it writes, so naming them again is harmless)."""
    names = frozenset() if after is before else after.touched
    return names | before.touched if isinstance(before.touched, Unwritten) else names
