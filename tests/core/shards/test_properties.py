"""Hypothesis properties of SPEC §6: exact cover, rising epochs, plans as a pure function, bounded movement."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.core.shards import plans
from tests.core.shards.shard_log import ShardLog

NODE = st.sampled_from([f"n{i}" for i in range(8)])
EVENT = st.one_of(
    st.tuples(st.just("NodeJoined"), NODE, st.integers(0, 5)),
    st.tuples(st.just("NodeLost"), NODE, st.just(0)),
    st.tuples(st.just("TaskCountSet"), st.integers(0, 3000), st.sampled_from(["scope", "ring"])),
    st.tuples(st.just("ShardAck"), NODE, st.integers(0, 2)),
    st.tuples(st.just("NodesSnapshot"), st.sets(NODE, max_size=5), st.just(0)),
)


def tasks_of(ranges: dict[str, Any]) -> list[int]:
    return sorted(t for spans in ranges.values() for a, b in spans for t in range(a, b + 1))


@given(st.lists(EVENT, max_size=40))
def test_plans_cover_every_task_once_with_rising_epochs_as_a_pure_function(events: list[tuple[Any, ...]]) -> None:
    log = ShardLog()
    for kind, a, b in events:
        if kind == "NodeJoined":
            log.join(a, f"h{b}:{a}")  # the address of a live node never changes: a second one is a dead letter
        elif kind == "NodeLost":
            log.send(kind, node=a)
        elif kind == "TaskCountSet":
            log.send(kind, tasks=a, strategy=b)
        elif kind == "ShardAck":
            log.send(kind, node=a, epoch=max(1, log.state.epoch - b))
        else:
            log.send(kind, nodes=[{"node": n, "address": f"h0:{n}"} for n in sorted(a)])
    epoch = 0
    for plan in log.plans:
        assert plan["epoch"] in (epoch, epoch + 1)  # a new epoch, or the same one acknowledged further
        if plan["epoch"] == epoch + 1:
            assert plan["awaiting"] == sorted(plan["nodes"])  # a new epoch awaits every live node
        epoch = plan["epoch"]
        owned = tasks_of(plan["ranges"])
        assert owned == (list(range(1, plan["tasks"] + 1)) if plan["nodes"] else [])  # each task exactly once
        assert sorted(plan["ranges"]) == sorted(plan["nodes"])
        expected = plans.plan(plan["strategy"], dict(reversed(list(plan["nodes"].items()))), plan["tasks"])
        assert plan["ranges"] == {n: [list(r) for r in rs] for n, rs in expected.items()}
        assert plan["released"] == (not plan["awaiting"])
        assert set(plan["awaiting"]) <= set(plan["nodes"])


@given(st.sets(st.text("abcdefgh0123456789", min_size=1, max_size=6), min_size=1, max_size=12),
       st.text("xyz", min_size=1, max_size=4), st.integers(1, 20_000))
def test_ring_moves_only_to_a_joiner_and_about_a_share_of_the_tasks(nodes: set[str], new: str, tasks: int) -> None:
    live = {n: "h" for n in nodes}
    before, after = plans.ring(live, tasks), plans.ring({**live, new: "h"}, tasks)
    assert {owner for _, _, _, owner in plans.changes(before, after)} <= {new}
    # about T/(L+1): within twice it, plus the hash's noise on a few tasks (3 tasks may all go to the joiner)
    assert plans.moved(before, after) <= 2 * tasks / (len(nodes) + 1) + 2 * tasks ** 0.5
    lost = plans.ring({**live, new: "h"}, tasks), plans.ring(live, tasks)  # and back: only its tasks move
    assert {old for _, _, old, _ in plans.changes(*lost)} <= {new}


@st.composite
def memberships(draw: st.DrawFn) -> list[tuple[str, str, int, list[str]]]:
    """Joins and losses as ZooKeeper orders them (each registration a higher zxid), and snapshots read at any
    zxid so far, some of them (a deposed leader's) older than registrations published since."""
    steps: list[tuple[str, str, int, list[str]]] = []
    zxid, live = 0, {}
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["join", "join", "lose", "snapshot"]))
        node = draw(st.sampled_from(["n1", "n2", "n3"]))
        if kind == "join" and node not in live:
            zxid += draw(st.integers(1, 3))
            live[node] = zxid
            steps.append(("join", node, zxid, []))
        elif kind == "lose" and node in live:
            steps.append(("lose", node, live.pop(node), []))
            zxid += 1
        elif kind == "snapshot":
            read = draw(st.integers(0, zxid))
            listed = draw(st.lists(st.sampled_from(["n1", "n2", "n3"]), unique=True))
            steps.append(("snapshot", "", read, listed))
    return steps


@given(memberships())
def test_a_snapshot_read_before_the_newest_registration_never_changes_the_membership(
        steps: list[tuple[str, str, int, list[str]]]) -> None:
    log, newest = ShardLog(), 0
    log.send("TaskCountSet", tasks=10)
    for kind, node, zxid, listed in steps:
        before = log.state
        if kind == "join":
            log.send("NodeJoined", node=node, address=f"{node}:1", incarnation=zxid)
        elif kind == "lose":
            log.send("NodeLost", node=node, incarnation=zxid)
        else:
            nodes = [{"node": n, "address": f"{n}:1", "incarnation": 0} for n in listed]
            out = log.send("NodesSnapshot", nodes=nodes, zxid=zxid)
            if 0 < zxid < newest:
                assert out == [] and (log.state.nodes, log.state.plan) == (before.nodes, before.plan)
        newest = max(newest, zxid)
        assert log.state.newest == newest
