"""What every fold does before and instead of folding a record: recognise a redelivery, dead-letter a reject.

Written once for all folds: a fold's state carries `offsets` (the last input offset applied per
topic partition), `applied` (how many inputs so far: the next one's `cause.position`) and
per-stream `seqs` behind `next_seq`, and is copied here with `_replace`: a named tuple's, or a
native state's method of that name (compiled, a named tuple's costs fifteen times a native
constructor: the pools' and the dispatcher's states are native classes, and build their admitted
state from `offsets_after` themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Protocol, Self, TypeVar

from streams.core.deadletter import Rejected, dead_letter
from streams.core.outputs import DLQ, Emit
from streams.core.source import SourceRecord, origin

NO_COUNTS: Mapping[str, int] = MappingProxyType({})  # a state's seqs and offsets before any: shared, unchangeable


class Applied(Protocol):
    """A fold's state as far as redelivery and dead letters need it."""

    @property
    def offsets(self) -> Mapping[str, int]: ...

    @property
    def applied(self) -> int: ...

    def next_seq(self, stream: str) -> tuple[Self, int]: ...

    def _replace(self, *, offsets: Mapping[str, int], applied: int) -> Self: ...  # a named tuple's (a native
    # class's state, the pools', defines one of these two fields)


S = TypeVar("S", bound=Applied)


def admit(state: S, record: SourceRecord) -> S | None:
    """The state with `record` counted as applied; None if it was (a redelivery after a crash)."""
    offsets = offsets_after(state.offsets, record)
    return None if offsets is None else state._replace(offsets=offsets, applied=state.applied + 1)


def offsets_after(offsets: Mapping[str, int], record: SourceRecord) -> dict[str, int] | None:
    """A state's `offsets` with `record`'s applied; None if it was (a redelivery after a crash).

    The last offset is kept per topic partition (`origin` says why). The busiest folds (the pools', the
    dispatcher's) build their admitted state from it themselves: compiled, `admit` reads a state through
    the protocol and calls its `_replace` with keywords as Python does (0.5-1 us a call, timed alone).
    """
    where = origin(record)
    if record.offset <= offsets.get(where, -1):
        return None
    return {**offsets, where: record.offset}


def reject(state: S, record: SourceRecord, rejection: Rejected, key: str,
           admitted: bool = False) -> tuple[S, list[Emit]]:
    """The dead letter for `record` of `key`, numbered per key and source topic (counting it as applied)."""
    if not admitted:
        state = admit(state, record) or state
    numbered, seq = state.next_seq(f"{DLQ}:{record.topic}")
    return numbered, [Emit(DLQ, key, dead_letter(record, key, seq, rejection, numbered.applied))]


def fold_or_reject(state: S, record: SourceRecord, key: str,
                   step: Callable[[S], tuple[S, list[Emit]]]) -> tuple[S, list[Emit]]:
    """`step` on the state with `record` admitted, or `record`'s dead letter if `step` rejects it; nothing for
    a redelivery. (The pool fold, the hot path, and the dispatcher's, which clears its touched buckets first,
    keep this inline.)"""
    admitted = admit(state, record)
    if admitted is None:
        return state, []
    try:
        return step(admitted)
    except Rejected as rejection:
        return reject(admitted, record, rejection, key, admitted=True)
