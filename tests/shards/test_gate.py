"""The gate: every condition under which a node may start a task, and each refusal's reason."""

from __future__ import annotations

from typing import Any

from streams.shards.gate import Gate


def plan(epoch: int, released: bool = True, incarnation: int = 7) -> dict[str, Any]:
    return {"epoch": epoch, "released": released, "ranges": {"a": [[1, 10]], "b": [[11, 20]]},
            "incarnations": {"a": incarnation, "b": 3}}


def ready() -> Gate:
    gate = Gate("a", connected=True, registered=True, paused=False, lease_until=100.0, incarnation=7)
    gate.see(plan(3))
    gate.acked = 3
    return gate


def test_a_node_runs_its_own_tasks_in_the_released_epoch_it_acknowledged() -> None:
    gate = ready()
    assert gate.refusal(5, 3, now=50.0) is None
    assert gate.refusal(15, 3, now=50.0) == "task 15 is not this node's in epoch 3"


def test_a_run_under_an_older_epoch_than_the_acknowledged_one_is_refused() -> None:
    gate = ready()
    gate.see(plan(4))
    gate.acked = 4
    assert gate.refusal(5, 3, now=50.0) == "stale epoch 3 (newest 4, acknowledged 4)"
    assert gate.see(plan(2)) is False and gate.plan is not None and gate.plan["epoch"] == 4


def test_nothing_starts_unreleased_unacknowledged_paused_unleased_or_disconnected() -> None:
    gate = ready()
    gate.see(plan(4, released=False))
    assert gate.refusal(5, 4, now=50.0) == "epoch 4 not acknowledged"
    gate.acked = 4
    assert gate.refusal(5, 4, now=50.0) == "epoch 4 not released"
    gate.see(plan(4))
    gate.paused = True
    assert gate.refusal(5, 4, now=50.0) == "paused (/shard exists)"
    gate.paused = False
    assert gate.refusal(5, 4, now=100.0) == "lease expired"
    gate.connected = False
    assert gate.refusal(5, 4, now=50.0) == "no ZooKeeper session"


def test_a_plan_made_for_an_earlier_incarnation_gives_the_node_nothing() -> None:
    gate = ready()
    gate.see(plan(5, incarnation=6))
    assert gate.mine == () and not gate.ours(plan(5, incarnation=6))
    gate.acked = 5
    assert gate.refusal(5, 5, now=50.0) == "task 5 is not this node's in epoch 5"
