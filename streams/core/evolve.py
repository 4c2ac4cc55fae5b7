"""`evolve(obj, **changes)`: `dataclasses.replace` for the hot paths, without re-running `__init__`.

A fold copies its frozen state several times per record; `dataclasses.replace` validates and
calls `__init__` each time, which was a fifth of a record's cost in replay (bench/replay_file.py).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


@cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def evolve(obj: T, **changes: Any) -> T:
    cls: Any = type(obj)
    new: T = object.__new__(cls)
    for name in _names(cls):
        object.__setattr__(new, name, changes[name] if name in changes else getattr(obj, name))
    return new
