"""The catalogue of tribunal's folds: which input topics each reads, what it writes, how it starts.

The worker runs one agent per fold, replay routes each record to the fold that reads its topic,
and the topic catalogue is derived from here, so a component added later is one entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streams.core import limits, pool
from streams.core.deadletter import Rejected
from streams.core.outputs import Emit
from streams.core.source import SourceRecord


@dataclass(frozen=True, slots=True)
class Fold:
    name: str  # the agent's name, and what a key is scoped by ("pools": pool ids; "groups": scheduler groups)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    compacted: frozenset[str]  # topics (inputs or outputs) whose latest record per key is what counts
    empty: Callable[[], Any]
    apply: Callable[[Any, SourceRecord, str], tuple[Any, list[Emit]]]
    reject: Callable[[Any, SourceRecord, Rejected, str], tuple[Any, list[Emit]]]
    key_of: Callable[[SourceRecord, str], str]  # the one state a record of a logical input belongs to

    @property
    def repartition(self) -> str:
        """The internal topic that carries records to their key's partition (as Kafka Streams' `-repartition`)."""
        return f"{self.name}.repartition"


POOLS = Fold("pools", pool.INPUTS, (pool.SCALING_DECISIONS, pool.JUSTICE_OUTCOMES), frozenset({pool.POLICIES}),
             pool.PoolState, pool.apply, pool.reject, pool.key_of)
GROUPS = Fold("groups", limits.INPUTS, limits.OUTPUTS, frozenset({limits.REJECTION_LIMITS}),
              limits.GroupState, limits.apply, limits.reject, limits.key_of)
FOLDS = (POOLS, GROUPS)
BY_INPUT = {topic: fold for fold in FOLDS for topic in fold.inputs}
BY_NAME = {fold.name: fold for fold in FOLDS}


def route(topic: str, prefix: str = "") -> tuple[str, Fold] | None:
    """The logical input topic a (prefixed) topic name is, and the fold that reads it."""
    name = topic.removeprefix(prefix)
    fold = BY_INPUT.get(name)
    return None if fold is None else (name, fold)


def scope(record: SourceRecord, prefix: str = "") -> tuple[str, str] | None:
    """(fold, key): the one state an input record is folded into, wherever it arrived; None for other topics."""
    routed = route(record.topic, prefix)
    if routed is None:
        return None
    logical, fold = routed
    return (fold.name, fold.key_of(record, logical))
