"""The catalogue of tribunal's folds, and `Fold`: everything the shells need to know of one.

A fold is pure functions and names: its input and output topics, how its state starts, how a
record changes it (`apply`), whose state a record is (`key_of`), how the state is stored in the
worker's changelog-backed tables (`tables`, `parts`, `load`) and how an operator reads it (`describe`,
`explain`). The worker runs one agent per fold, replay and `explain` route each record to the
fold that reads its topic, and the topic catalogue is derived from here, so a fold is added by
writing it and its entry in `FOLDS` (or, for a fold outside this package, `register`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from streams.core import admission, dispatch, groups, pools, shards
from streams.core.deadletter import Rejected
from streams.core.dispatch import codec as dispatch_codec
from streams.core.dispatch import view as dispatch_view
from streams.core.groups import codec as group_codec
from streams.core.groups import view as group_view
from streams.core.outputs import SILENT_INPUTS, Emit
from streams.core.pools import codec as pool_codec
from streams.core.pools import view as pool_view
from streams.core.shards import view as shard_view
from streams.core.source import SourceRecord, cause_of

S = TypeVar("S", bound=admission.Applied)


def always(before: Any, after: Any) -> bool:
    return True


def nothing_to_add(before: Any, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {}


def as_json(found: Mapping[str, Any]) -> list[str]:
    """`explain`'s text for a fold without its own: the key's state before and after, and the outputs."""
    return [f"before  {json.dumps(found['before'], sort_keys=True)}",
            f"after   {json.dumps(found['after'], sort_keys=True)}",
            *(f"output  {json.dumps(o, sort_keys=True)}" for o in found["outputs"])]


@dataclass(frozen=True, slots=True)
class Table(Generic[S]):
    """One changelog-backed table holding part of every key's state: written once per batch for each key
    whose state `changed` in a way this table stores (parts that rarely change get a table of their own)."""

    name: str
    dump: Callable[[S], Any]
    changed: Callable[[S, S], bool] = always


@dataclass(frozen=True, slots=True)
class Parts(Generic[S]):
    """A changelog-backed table holding a large part of a key's state in pieces, each its own entry
    (`key/piece`), so that a record rewrites only the pieces it changed (a dispatcher namespace's
    jobs, in buckets): Kafka takes at most 1 MB a request, and a key's whole state can be more."""

    name: str
    changed: Callable[[S, S], Iterable[str]]  # the pieces a record changed, from the state before and after it
    dump: Callable[[S, str], Any]  # one piece's entry
    listed: Callable[[Any], Iterable[str]]  # the pieces a key has, from its entry in the fold's first table


@dataclass(frozen=True, slots=True)
class Fold(Generic[S]):
    name: str  # the agent's name, and what a key is scoped by (pools, scheduler groups, dispatcher namespaces)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    compacted: frozenset[str]  # topics (inputs or outputs) whose latest record per key is what counts
    empty: Callable[[], S]
    apply: Callable[[S, SourceRecord, str], tuple[S, list[Emit]]]
    key_of: Callable[[SourceRecord, str], str]  # the one state a record of a logical input belongs to
    tables: tuple[Table[S], ...]  # the first is written for every change (a key exists if it has an entry)
    load: Callable[..., S]  # the state from each table's stored entry (None where it has none), in `tables` order,
    # then for each of `parts` a mapping of its pieces' entries
    describe: Callable[[str, S], dict[str, Any]]  # a key's state as an operator reads it
    explain: Callable[[S, list[dict[str, Any]]], dict[str, Any]] = nothing_to_add  # from the state before and
    # the record's decoded outputs: what `explain` adds to the generic input, before, after and outputs
    render: Callable[[Mapping[str, Any]], list[str]] = as_json  # `explain`'s text lines for what it found (not
    # called for a dead-lettered record: its reason is the text)
    parts: tuple[Parts[S], ...] = ()
    gauges: Callable[[S], Mapping[str, float]] | None = None  # figures of a key's state an operator graphs:
    # metric name -> value (the worker's `/metrics`, labelled with the key)
    item: Callable[[S, str], dict[str, Any] | None] | None = None  # one named thing in a key's state (a job)
    summary: Callable[[str, S], dict[str, Any]] | None = None  # `describe` without what grows with the state (a
    # namespace's jobs), for the report, which reads it after every record; None: `describe` is small already
    key_name: str = "key"  # what one of its keys is called: the CLI's option for it (`--pool`), the report's title
    numbered_by: str | None = None  # the output stream whose `seq` names a decision (`explain --pool P --seq N`)
    clocked: bool = False  # its state keeps a clock from its records' timestamps (`source.event_time`): its input
    # topics are dated by the broker (`streams.topics`), so no producer's clock moves it
    self_contained: Callable[[S], S] | None = None  # the state deciding as it would if its outputs each stated the
    # whole picture (a pool under `decisions: changes`): what `explain` and `what-if` fold a record again with
    keyed: frozenset[str] = frozenset()  # the logical inputs whose records belong to the state their own key names
    # (`key_of` reads no value): a replay on several processes routes their lines without building their records

    def step(self, state: S, record: SourceRecord, topic: str) -> tuple[S, list[Emit]]:
        """`apply`, with an input it applied that wrote nothing answered on `silent-inputs` (`SilentInput`).

        Whether an input writes something can depend on where it is applied (an acknowledgement is stale
        after a node's loss, not before), and the worker applies the inputs of several topics in arrival
        order. So every applied input leaves its `cause.position` among its key's inputs, and replay places
        each exactly (`streams.audit.order`). A redelivery, applied already, is not answered again.
        """
        after, outputs = self.apply(state, record, topic)
        if outputs or after.applied == state.applied:
            return after, outputs
        key = self.key_of(record, topic)
        after, seq = after.next_seq(SILENT_INPUTS)
        return after, [Emit(SILENT_INPUTS, f"{self.name}/{key}", {
            "type": "SilentInput", "fold": self.name, "key": key, "seq": seq,
            "cause": cause_of(record, after.applied)})]

    def reject(self, state: S, record: SourceRecord, rejection: Rejected, key: str) -> tuple[S, list[Emit]]:
        """The dead letter for `record`, as the shell writes it for a record it could not fold."""
        return admission.reject(state, record, rejection, key)

    @property
    def repartition(self) -> str:
        """The internal topic that carries records to their key's partition (as Kafka Streams' `-repartition`)."""
        return f"{self.name}.repartition"


POOLS: Fold[pools.PoolState] = Fold(
    "pools", pools.INPUTS, pools.OUTPUTS, frozenset({pools.POLICIES, pools.POOL_INSTANCES}), pools.PoolState,
    pools.apply, pools.key_of, tables=(Table("pool-state", pool_codec.dump_state),
                                       Table("pool-policies", pool_codec.dump_policies, pool_codec.policies_changed)),
    load=pool_codec.load, describe=pool_view.describe, explain=pool_view.explain, render=pool_view.render,
    self_contained=pools.self_contained, keyed=pools.KEYED,
    gauges=pool_view.gauges, key_name="pool", numbered_by=pools.SCALING_DECISIONS, clocked=True)
GROUPS: Fold[groups.GroupState] = Fold(
    "groups", groups.INPUTS, groups.OUTPUTS, frozenset({groups.REJECTION_LIMITS}), groups.GroupState, groups.apply,
    groups.key_of, tables=(Table("group-state", group_codec.dump),), load=group_codec.load,
    describe=group_view.describe, explain=group_view.explain, render=group_view.render, gauges=group_view.gauges,
    key_name="group", numbered_by=groups.GROUP_HEALTH,
    parts=(Parts("group-buckets", group_codec.touched, group_codec.dump_bucket, group_codec.listed),))
DISPATCH: Fold[dispatch.DispatchState] = Fold(
    "dispatch", dispatch.INPUTS, dispatch.OUTPUTS, frozenset({dispatch.DISPATCHER_HEALTH}), dispatch.DispatchState,
    dispatch.apply, dispatch.key_of, tables=(Table("dispatch-state", dispatch.dump),), load=dispatch.load,
    describe=dispatch_view.describe, explain=dispatch_view.explain, render=dispatch_view.render,
    item=dispatch_view.job, summary=dispatch_view.summary, key_name="namespace",
    numbered_by=dispatch.DISPATCHER_HEALTH, clocked=True,
    parts=(Parts("dispatch-jobs", dispatch_codec.touched, dispatch_codec.dump_bucket, dispatch_codec.listed),))
SHARDS: Fold[shards.ShardState] = Fold(
    "shards", shards.INPUTS, shards.OUTPUTS, frozenset({shards.SHARD_PLANS}), shards.ShardState, shards.apply,
    shards.key_of, tables=(Table("shard-state", shards.dump),), load=shards.load, describe=shard_view.describe,
    explain=shard_view.explain, render=shard_view.render, key_name="job_set", numbered_by=shards.SHARD_PLANS)
FOLDS: list[Fold[Any]] = []
BY_INPUT: dict[str, Fold[Any]] = {}
BY_NAME: dict[str, Fold[Any]] = {}


def register(fold: Fold[Any]) -> None:
    """Add a fold to the catalogue (the worker, replay, `explain` and the topics all read it from here)."""
    clash = BY_NAME.keys() & {fold.name} or BY_INPUT.keys() & set(fold.inputs)
    if clash:
        raise ValueError(f"fold {fold.name!r}: {sorted(clash)} already in the catalogue")
    FOLDS.append(fold)
    BY_NAME[fold.name] = fold
    BY_INPUT.update(dict.fromkeys(fold.inputs, fold))


register(POOLS)
register(GROUPS)
register(DISPATCH)
register(SHARDS)


def route(topic: str, prefix: str = "") -> tuple[str, Fold[Any]] | None:
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
