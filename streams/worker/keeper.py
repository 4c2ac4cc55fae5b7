"""A fold's states per key while the worker folds: decoded once, kept in memory, written once per batch."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from streams.core.folds import Fold

S = TypeVar("S")


class Keeper(Generic[S]):
    """One fold's decoded states, read from its tables once per key and assignment.

    The cache is the state of record while folding: the tables and their changelogs receive a
    key's state once per batch (`writes`, called by the checkpoint), and a table whose part of the
    state did not change since the last write (a pool's policies, say) is not written. After a
    rebalance the checkpoint makes it `forget`, and states are read again from the tables
    recovery rebuilt.
    """

    def __init__(self, fold: Fold[Any], tables: list[Any], parts: list[Any]) -> None:
        self.fold = fold
        self.tables = tables  # Faust tables, in `fold.tables` order
        self.parts = parts  # Faust tables, in `fold.parts` order
        self.cache: dict[str, S] = {}
        self._changed: dict[str, set[int]] = {}  # key -> the other tables to write at the next batch
        self._pieces: dict[str, dict[int, set[str]]] = {}  # key -> for each of `parts`, the pieces to write

    def exists(self, key: str) -> bool:
        return key in self.cache or self.tables[0].get(key) is not None

    def load(self, key: str) -> S:
        state = self.cache.get(key)
        if state is None:
            entries = [table.get(key) for table in self.tables]
            pieces = [{name: table.get(f"{key}/{name}") for name in part.listed(entries[0])}
                      for part, table in zip(self.fold.parts, self.parts, strict=True)]
            state = self.cache[key] = self.fold.load(*entries, *pieces)
        return state

    def keep(self, key: str, before: S, after: S) -> None:
        self.cache[key] = after
        for i, table in enumerate(self.fold.tables[1:], 1):
            if table.changed(before, after):
                self._changed.setdefault(key, set()).add(i)
        for i, part in enumerate(self.fold.parts):
            names = part.changed(before, after)
            if names:
                self._pieces.setdefault(key, {}).setdefault(i, set()).update(names)

    def writes(self, key: str) -> list[tuple[Any, str, Any]]:
        """(table, key, value) for each table entry that stores `key`'s current state."""
        state = self.cache[key]
        tables = self.fold.tables
        # Pieces and the tables that change rarely first (a pool's policies): under at-least-once a crash
        # between two writes then leaves a policy without its state, never a state whose policy is missing.
        pieces = [(self.parts[i], f"{key}/{name}", self.fold.parts[i].dump(state, name))
                  for i, names in sorted(self._pieces.pop(key, {}).items()) for name in sorted(names)]
        return pieces + [(self.tables[i], key, tables[i].dump(state)) for i in (*sorted(self._changed.pop(key, ())), 0)]

    def forget(self) -> None:
        self.cache.clear()
        self._changed.clear()
        self._pieces.clear()
