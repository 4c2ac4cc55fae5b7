"""The frozen native classes' equality and repr, written once in `streams.core.frozen`."""

from __future__ import annotations

import pytest

from streams.core.dispatch.state import Job, Worker
from streams.core.outputs import Emit


def test_equal_by_class_and_fields() -> None:
    assert Emit("s", "k", {"a": 1}) == Emit("s", "k", {"a": 1})
    assert Emit("s", "k", {"a": 1}) != Emit("s", "k", {"a": 2})
    assert Worker(3, 1, 2) == Worker(3, 1, 2)
    assert Worker(3, 1, 2) != Worker(3, 1, 3)


def test_another_class_is_never_equal() -> None:
    """Not even with the same fields: each class's own (`NotImplemented` both ways, so identity decides)."""
    assert Emit("s", "k", {}) != ("s", "k", {})
    assert ("s", "k", {}) != Emit("s", "k", {})  # noqa: SIM300 (the tuple asked first)
    assert Worker() != Emit("s", "k", {})


def test_unhashable_and_readable() -> None:
    with pytest.raises(TypeError):
        hash(Worker())
    assert repr(Emit("s", "k", {"a": 1})) == "Emit('s', 'k', {'a': 1})"
    job = Job("u", "e", "i", "w", 1, 2, 3, 0, 10)
    assert repr(job) == "Job" + repr(tuple(job.fields()))
