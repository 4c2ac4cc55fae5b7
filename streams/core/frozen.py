"""The base of the core's frozen native classes: equality and repr over their fields, written once.

The hot types (a pool's and a namespace's state, a verdict, a job, an output) are plain classes,
not named tuples or dataclasses: compiled by mypyc, a native constructor is a C call where a named
tuple's `__new__` or a dataclass's generated `__init__` stays a Python function. What the tuples
gave for nothing, comparison by value and a readable repr, each class gets here from the one tuple
of its fields it names (`_fields`, in constructor order).
"""

from __future__ import annotations


class Frozen:
    """Equal to another of its own class with equal fields; unhashable, as its fields may be dicts."""

    __slots__ = ()

    def _fields(self) -> tuple[object, ...]:
        """Every field, in the constructor's order."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frozen) or type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return type(self).__name__ + repr(self._fields())
