"""The order in which records are replayed.

Per partition the order is Kafka's: offsets. Across the input topics of one key it is not fixed
(the worker reads them in arrival order), so:

* `log_order` is the order an export writes: a merge of the partitions by record timestamp
  (ties by topic, partition), which never reorders a partition. It is what a worker sees when
  the records arrive as they were produced.
* `applied_order` is the order the worker actually applied, recovered from its outputs: every
  output's cause names its input and that input's `position` among the inputs applied for its
  key, so each key's inputs form a chain (`chains_from`; for outputs written without positions,
  each output stream's causes in `seq` order are chains instead). A topological merge of the
  chains with the partitions gives an order consistent with everything recorded; it exists for
  any log a worker wrote, and replaying it must reproduce the outputs exactly. Outputs that
  contradict each other (a record forged into a topic, say) cannot stop it: it then falls back
  to the log order, and verification reports the disagreement.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from streams.core.source import SourceRecord

Coordinates = tuple[str, int, int]  # topic, partition, offset


def coordinates(record: SourceRecord) -> Coordinates:
    return (record.topic, record.partition, record.offset)


class Named(NamedTuple):
    """The input a recorded output names as its `cause`: where it is, when, and its place among its key's
    inputs (None in outputs written before positions were)."""

    at: Coordinates
    timestamp: int
    position: int | None


def named_cause(value: bytes | None) -> Named | None:
    """The cause a recorded output's value names; None if it names none (not one of tribunal's records)."""
    try:
        cause = orjson.loads(value or b"null")["cause"]
        return Named((cause["topic"], int(cause["partition"]), int(cause["offset"])), int(cause["timestamp"]),
                     None if cause.get("position") is None else int(cause["position"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _partitions(records: Iterable[SourceRecord],
                scope: Callable[[SourceRecord], Hashable] | None = None) -> dict[tuple[Any, ...], list[SourceRecord]]:
    """Records by partition, each in offset order; with `scope`, by partition and scope (fold and key)."""
    out: dict[tuple[Any, ...], list[SourceRecord]] = {}
    for record in records:
        where = (record.topic, record.partition)
        out.setdefault(where if scope is None else (*where, scope(record)), []).append(record)
    for queue in out.values():
        queue.sort(key=lambda r: r.offset)
    return out


def log_order(records: Iterable[SourceRecord], topics: Sequence[str] = ()) -> list[SourceRecord]:
    rank = {t: i for i, t in enumerate(topics)}
    queues = _partitions(records)

    def key(r: SourceRecord) -> tuple[int, int, str, int, int]:
        return (r.timestamp, rank.get(r.topic, len(rank)), r.topic, r.partition, r.offset)

    return list(heapq.merge(*(queues[k] for k in sorted(queues)), key=key))


def applied_order(inputs: Iterable[SourceRecord], chains: Iterable[Sequence[Coordinates]],
                  topics: Sequence[str] = (), scope: Callable[[SourceRecord], Hashable] | None = None,
                  ) -> list[SourceRecord]:
    """Inputs in an order that follows every chain (each a stream's causes, in seq order).

    With `scope`, offset order is kept per partition and scope rather than per partition: a record
    forwarded to its key's partition is applied after records that came later on its own
    partition, for other keys, so only its own key's records keep their offset order (and
    demanding more can make the chains and the partitions contradict each other).
    """
    rank = {t: i for i, t in enumerate(topics)}
    queues = _partitions(inputs, scope)
    chains = [chain for chain in chains if chain]
    known = {coordinates(r) for q in queues.values() for r in q} if chains else set()
    chain_list = []
    for chain in chains:
        kept = list(dict.fromkeys(c for c in chain if c in known))  # first appearance, in order
        if kept:
            chain_list.append(kept)
    position = [0] * len(chain_list)
    member: dict[Coordinates, list[int]] = {}
    for i, chain in enumerate(chain_list):
        for c in chain:
            member.setdefault(c, []).append(i)
    done: set[Coordinates] = set()

    def free(c: Coordinates) -> bool:
        return all(chain_list[i][position[i]] == c for i in member.get(c, ()) if position[i] < len(chain_list[i]))

    def key(r: SourceRecord) -> tuple[int, int, str, int, int]:
        return (r.timestamp, rank.get(r.topic, len(rank)), r.topic, r.partition, r.offset)

    if not member:  # nothing recorded to follow: the merge below with every record free, done by heapq
        return list(heapq.merge(*queues.values(), key=key))
    heads = [(key(q[0]), k, 0) for k, q in queues.items()]
    heapq.heapify(heads)
    out: list[SourceRecord] = []
    while heads:
        blocked = []
        chosen = None
        while heads:
            entry = heapq.heappop(heads)
            record = queues[entry[1]][entry[2]]
            c = coordinates(record)
            if c not in member or free(c):
                chosen = entry
                break
            blocked.append(entry)
        if chosen is None:  # the chains contradict each other: take the earliest head anyway
            chosen = min(blocked)
            blocked.remove(chosen)
        for entry in blocked:
            heapq.heappush(heads, entry)
        _, k, index = chosen
        record = queues[k][index]
        out.append(record)
        c = coordinates(record)
        chains_of = member.get(c)
        if chains_of is not None:
            done.add(c)
            for i in chains_of:
                position[i] = _advance(chain_list[i], position[i], done)
        if index + 1 < len(queues[k]):
            heapq.heappush(heads, (key(queues[k][index + 1]), k, index + 1))
    return out


def _advance(chain: list[Coordinates], at: int, done: set[Coordinates]) -> int:
    while at < len(chain) and chain[at] in done:
        at += 1
    return at


def chains_from(streams: Iterable[Sequence[Named | None]], inputs: Iterable[SourceRecord],
                scope: Callable[[SourceRecord], Hashable]) -> list[list[Coordinates]]:
    """The chains `applied_order` follows, from the causes recorded outputs name (`named_cause` of each value,
    each stream in seq order).

    `scope(input)` names the state an input was applied to (fold and key): the inputs of one
    scope are chained by the positions their outputs name.
    """
    positions: dict[Coordinates, int] = {}
    chains: list[list[Coordinates]] = []
    for causes in streams:
        legacy = []
        for named in causes:
            if named is None:
                continue  # not one of ours: verification will say so
            if named.position is None:
                legacy.append(named.at)
            else:
                positions.setdefault(named.at, named.position)
        if legacy:
            chains.append(legacy)
    by_scope: dict[Hashable, list[tuple[int, Coordinates]]] = {}
    for record in inputs if positions else ():
        at = coordinates(record)
        if at in positions:
            by_scope.setdefault(scope(record), []).append((positions[at], at))
    chains.extend([at for _, at in sorted(entries)] for entries in by_scope.values())
    return chains
