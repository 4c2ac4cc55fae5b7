"""Shard plans (SPEC §6, seed 003) folded from the log: membership, task count and acknowledgements in, plans out.

Every change of the live set, the task count or the strategy makes a new epoch: its plan
(`plans.plan`, a pure function of the live set, T and the strategy) is published with every live
node awaited. Each node stops what is no longer its own and acknowledges the epoch on
`shard-acks`; the plan is published again as each acknowledgement arrives, and `released` with
the last, which is when new owners may start (revoke before grant). A node that never
acknowledges is waited for until ZooKeeper drops it: its `NodeLost` makes the next epoch, which
does not await it. The seed's pause (`/shard`) and the grace after a loss are the leader's, in
`streams.shards`; this fold is what they wait for.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from schemas import shards as records
from streams.core.admission import NO_COUNTS, fold_or_reject
from streams.core.deadletter import Rejected
from streams.core.intake import error_text, readable
from streams.core.outputs import Emit
from streams.core.shards import plans
from streams.core.source import SourceRecord, cause_of, event_time, named_key, record_key

SHARD_EVENTS = "shard-events"
SHARD_ACKS = "shard-acks"
INPUTS: tuple[str, ...] = (SHARD_EVENTS, SHARD_ACKS)
SHARD_PLANS = "shard-plans"
OUTPUTS: tuple[str, ...] = (SHARD_PLANS,)

NO_NODES: Mapping[str, str] = MappingProxyType({})
_EVENT: TypeAdapter[Any] = TypeAdapter(records.ShardEvent)
_ACK: TypeAdapter[records.ShardAck] = TypeAdapter(records.ShardAck)


class ShardState(NamedTuple):
    """One job set, folded. `plan` is the latest plan record's body (without cause and seq); None before the
    first epoch."""

    nodes: Mapping[str, str] = NO_NODES  # live node -> address
    incarnations: Mapping[str, int] = NO_COUNTS  # live node -> its incarnation (0: not said)
    newest: int = 0  # the newest registration (zxid) the log has told of, of any node, lost ones too, or the
    # newest snapshot's: a snapshot read before it is stale, whoever is live now
    tasks: int = 0
    strategy: str = "scope"
    plan: Mapping[str, Any] | None = None
    seqs: Mapping[str, int] = NO_COUNTS
    offsets: Mapping[str, int] = NO_COUNTS
    applied: int = 0

    @property
    def epoch(self) -> int:
        return 0 if self.plan is None else int(self.plan["epoch"])

    def next_seq(self, stream: str) -> tuple[ShardState, int]:
        seq = self.seqs.get(stream, 0) + 1
        return self._replace(seqs={**self.seqs, stream: seq}), seq


def key_of(record: SourceRecord, topic: str = "") -> str:
    """The job set a record belongs to: the one its value names, else its key."""
    return named_key(record, "job_set") or record_key(record)


def apply(state: ShardState, record: SourceRecord, topic: str) -> tuple[ShardState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its job set's state."""
    job_set = key_of(record, topic)

    def step(admitted: ShardState) -> tuple[ShardState, list[Emit]]:
        event = _parse(record, topic, job_set)
        if isinstance(event, records.ShardAck):
            return _acknowledged(admitted, event, record)
        return _changed(admitted, event, record)

    return fold_or_reject(state, record, job_set, step)


def _parse(record: SourceRecord, topic: str, job_set: str) -> Any:
    value = readable(record)
    adapter = _ACK if topic == SHARD_ACKS else _EVENT
    try:
        event = adapter.validate_json(value)
    except ValidationError as error:
        other = _EVENT if topic == SHARD_ACKS else _ACK
        try:
            other.validate_json(value)
        except ValidationError:
            raise Rejected("bad_event", f"invalid shard event: {error_text(error)}") from None
        raise Rejected("wrong_topic", f"this record does not belong on {topic!r}") from None
    if event.job_set != job_set or (bool(record.key) and record_key(record) != job_set):
        raise Rejected("job_set_mismatch", f"event names job set {event.job_set!r} but its key is "
                                           f"{record_key(record)!r}")
    return event


def _changed(state: ShardState, event: Any, record: SourceRecord) -> tuple[ShardState, list[Emit]]:
    nodes, incs, tasks, strategy = dict(state.nodes), dict(state.incarnations), state.tasks, state.strategy
    newest = state.newest
    if isinstance(event, records.NodeJoined):
        _join(nodes, incs, event)
        newest = max(newest, event.incarnation)
    elif isinstance(event, records.NodeLost):
        if not event.incarnation or event.incarnation == incs.get(event.node, 0) or not incs.get(event.node):
            nodes.pop(event.node, None)
            incs.pop(event.node, None)  # else a stale loss: of an incarnation that is not the live one
    elif isinstance(event, records.TaskCountSet):
        tasks, strategy = event.tasks, event.strategy or strategy
    else:  # NodesSnapshot
        listed = [n.node for n in event.nodes]
        twice = sorted({n for n in listed if listed.count(n) > 1})
        if twice:
            raise Rejected("duplicate_node", f"the snapshot lists {twice} more than once")
        if event.zxid and event.zxid < newest:
            return state, []  # read before a registration the log has already (of a node since lost, maybe): stale
        nodes = {n.node: n.address for n in event.nodes}
        incs = {n.node: n.incarnation or state.incarnations.get(n.node, 0) for n in event.nodes}
        newest = max(newest, event.zxid, *incs.values())
    if newest != state.newest:
        state = state._replace(newest=newest)
    if (nodes, incs, tasks, strategy) == (dict(state.nodes), dict(state.incarnations), state.tasks, state.strategy):
        return state, []  # ZooKeeper told us what the log said already
    joined = sorted(n for n in nodes if (nodes[n], incs[n]) != (state.nodes.get(n), state.incarnations.get(n)))
    lost = sorted(n for n in state.nodes if n not in nodes)
    change = _change(event, joined, lost, state)
    state = state._replace(nodes=MappingProxyType(dict(sorted(nodes.items()))),
                           incarnations=MappingProxyType(dict(sorted(incs.items()))), tasks=tasks, strategy=strategy)
    ranges = plans.plan(strategy, state.nodes, tasks)
    before = {} if state.plan is None else state.plan["ranges"]
    plan = {"type": "ShardPlan", "job_set": event.job_set, "epoch": state.epoch + 1, "strategy": strategy,
            "tasks": tasks, "nodes": dict(state.nodes), "incarnations": dict(state.incarnations),
            "ranges": {node: [list(span) for span in spans] for node, spans in ranges.items()},
            "moved": plans.moved(before, ranges), "change": change, "joined": joined, "lost": lost,
            "awaiting": list(state.nodes), "released": not state.nodes, "published_at": event_time(record),
            "paused_ms": 0 if not state.nodes else None}
    return _publish(state, plan, record)


def _join(nodes: dict[str, str], incs: dict[str, int], event: records.NodeJoined) -> None:
    """A node registered: new, or again in a new session (a new incarnation, to be planned anew), or a
    contradiction: a second process claiming a live node's id from another address."""
    known, inc = nodes.get(event.node), incs.get(event.node, 0)
    if event.incarnation and inc and event.incarnation < inc:
        return  # an earlier registration's, published late: the later one stands
    again = event.incarnation and inc and event.incarnation != inc
    if known is not None and known != event.address and not again:
        raise Rejected("duplicate_node", f"node {event.node!r} is live at {known!r} already; a second "
                                         f"process with its id at {event.address!r}?")
    nodes[event.node] = event.address
    incs[event.node] = event.incarnation or inc


def _change(event: Any, joined: list[str], lost: list[str], state: ShardState) -> str:
    if isinstance(event, records.TaskCountSet):
        what = [f"tasks {state.tasks} -> {event.tasks}"] if event.tasks != state.tasks else []
        if event.strategy and event.strategy != state.strategy:
            what.append(f"strategy {state.strategy} -> {event.strategy}")
        return ", ".join(what)
    kind = {"NodeJoined": "joined", "NodeLost": "lost", "NodesSnapshot": "snapshot"}[event.type]
    named = [f"+{n}" for n in joined] + [f"-{n}" for n in lost]
    return f"{kind}: {' '.join(named)}"


def _acknowledged(state: ShardState, ack: records.ShardAck, record: SourceRecord) -> tuple[ShardState, list[Emit]]:
    if state.plan is None:
        raise Rejected("unknown_job_set", f"no plan was ever made for job set {ack.job_set!r}")
    if ack.epoch > state.epoch:
        raise Rejected("unknown_epoch", f"epoch {ack.epoch} was never published (the latest is {state.epoch})")
    if ack.epoch < state.epoch or ack.node not in state.plan["awaiting"]:
        return state, []  # an earlier epoch's, or said already: nothing waits for it
    awaiting = [n for n in state.plan["awaiting"] if n != ack.node]
    plan = {**state.plan, "awaiting": awaiting, "released": not awaiting,
            "paused_ms": None if awaiting else max(0, event_time(record) - state.plan["published_at"])}
    return _publish(state, plan, record)


def _publish(state: ShardState, plan: dict[str, Any], record: SourceRecord) -> tuple[ShardState, list[Emit]]:
    state, seq = state.next_seq(SHARD_PLANS)
    state = state._replace(plan=plan)
    return state, [Emit(SHARD_PLANS, plan["job_set"], {**plan, "cause": cause_of(record, state.applied), "seq": seq})]


def dump(state: ShardState) -> dict[str, Any]:
    return {"nodes": dict(state.nodes), "incarnations": dict(state.incarnations), "newest": state.newest,
            "tasks": state.tasks,
            "strategy": state.strategy, "plan": state.plan,
            "seqs": dict(state.seqs), "offsets": dict(state.offsets), "applied": state.applied}


def load(data: Mapping[str, Any] | None) -> ShardState:
    if not data:
        return ShardState()
    return ShardState(nodes=MappingProxyType(dict(data["nodes"])),
                      incarnations=MappingProxyType(dict(data["incarnations"])),
                      newest=int(data.get("newest", max(data["incarnations"].values(), default=0))),
                      tasks=int(data["tasks"]),
                      strategy=str(data["strategy"]), plan=data["plan"], seqs=dict(data["seqs"]),
                      offsets=dict(data["offsets"]), applied=int(data["applied"]))
