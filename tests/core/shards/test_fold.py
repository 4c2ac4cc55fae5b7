"""The shard fold: epochs, acknowledgements and release, failover plans, dead letters, reload."""

from __future__ import annotations

from schemas.shards import ShardPlan
from streams.core import shards
from streams.core.source import SourceRecord
from tests.core.shards.shard_log import ShardLog


def three_nodes(strategy: str | None = None) -> ShardLog:
    log = ShardLog()
    log.send("TaskCountSet", tasks=2300, **({"strategy": strategy} if strategy else {}))
    for node in "321":
        log.join(node)
    return log


def test_spec_example_and_epochs_rise_one_per_change() -> None:
    log = three_nodes()
    plans = log.plans
    assert [p["epoch"] for p in plans] == [1, 2, 3, 4]  # the task count, then each join
    last = plans[-1]
    assert last["ranges"] == {"1": [[1, 766]], "2": [[767, 1532]], "3": [[1533, 2300]]}
    assert last["awaiting"] == ["1", "2", "3"] and not last["released"]
    assert last["change"] == "joined: +1" and last["joined"] == ["1"] and last["lost"] == []
    assert plans[0]["released"] and plans[0]["ranges"] == {}  # no node yet: nothing to wait for
    for p in plans:
        ShardPlan.model_validate(p)


def test_the_plan_is_released_by_the_last_awaited_ack() -> None:
    log = three_nodes()
    log.send("ShardAck", node="2", epoch=4, at=1_732_200_000_100)
    assert log.plans[-1]["awaiting"] == ["1", "3"] and not log.plans[-1]["released"]
    assert log.send("ShardAck", node="2", epoch=4) == []  # said already
    assert log.send("ShardAck", node="1", epoch=3) == []  # an earlier epoch's
    log.send("ShardAck", node="1", epoch=4)
    out = log.send("ShardAck", node="3", epoch=4, at=1_732_200_000_900)
    released = dict(out[0].record)
    assert released["released"] and released["awaiting"] == [] and released["epoch"] == 4
    assert released["paused_ms"] == 1_732_200_000_900 - log.plans[3]["published_at"]
    assert [p["seq"] for p in log.plans] == list(range(1, len(log.plans) + 1))


def test_a_lost_node_is_not_awaited_and_its_range_goes_to_the_survivors() -> None:
    log = three_nodes()
    log.send("ShardAck", node="1", epoch=4)
    log.send("ShardAck", node="2", epoch=4)  # node 3 never acks...
    log.send("NodeLost", node="3")  # ...until ZooKeeper drops it
    plan = log.plans[-1]
    assert plan["epoch"] == 5 and plan["lost"] == ["3"] and plan["awaiting"] == ["1", "2"]
    assert plan["ranges"] == {"1": [[1, 1150]], "2": [[1151, 2300]]}
    assert plan["moved"] == (1150 - 767 + 1) + (2300 - 1533 + 1)  # 767-1150 from 2 to 1, 1533-2300 from 3 to 2
    assert log.send("NodeLost", node="3") == []  # lost already


def test_a_snapshot_repairs_the_live_set_and_agreeing_ones_change_nothing() -> None:
    log = three_nodes()
    assert log.send("NodesSnapshot", nodes=[{"node": n, "address": f"10.0.0.{n}:9000"} for n in "123"]) == []
    log.send("NodesSnapshot", nodes=[{"node": "1", "address": "10.0.0.1:9000"},
                                     {"node": "4", "address": "10.0.0.4:9000"}])
    plan = log.plans[-1]
    assert plan["joined"] == ["4"] and plan["lost"] == ["2", "3"] and plan["change"] == "snapshot: +4 -2 -3"
    assert plan["ranges"] == {"1": [[1, 1150]], "4": [[1151, 2300]]}


def test_the_ring_strategy_is_opt_in_and_moves_only_to_a_joiner() -> None:
    log = three_nodes("ring")
    before = log.plans[-1]
    log.join("4")
    after = log.plans[-1]
    assert after["strategy"] == "ring" and 0 < after["moved"] <= 2 * 2300 // 4
    for node in "123":
        kept = {t for a, b in after["ranges"][node] for t in range(a, b + 1)}
        assert kept <= {t for a, b in before["ranges"][node] for t in range(a, b + 1)}


def test_bad_input_goes_to_the_dead_letters_with_a_reason() -> None:
    log = ShardLog()
    log.send("ShardAck", node="1", epoch=1)
    log.send("TaskCountSet", tasks=-1)
    log.join("1", "a:1")
    log.join("1", "b:1")  # a second process with the same id
    log.send("NodesSnapshot", nodes=[{"node": "1", "address": "a:1"}, {"node": "1", "address": "a:1"}])
    log.send("ShardAck", node="1", epoch=9)
    log.raw(shards.SHARD_ACKS, b'{"type": "NodeLost", "job_set": "js", "node": "1"}')
    log.raw(shards.SHARD_EVENTS, b'{"type": "NodeLost", "job_set": "other", "node": "1"}', key=b"js")
    log.raw(shards.SHARD_EVENTS, b"\xff not json")
    log.send("NodeJoined", node="a/b", address="x")
    codes = [d["reason_code"] for d in log.dead]
    assert codes == ["unknown_job_set", "bad_event", "duplicate_node", "duplicate_node", "unknown_epoch",
                     "wrong_topic", "job_set_mismatch", "bad_event", "bad_event"]
    assert all(d["reason"] for d in log.dead)
    assert log.state.nodes == {"1": "a:1"} and log.state.epoch == 1


def test_a_redelivered_record_changes_nothing_and_the_state_survives_a_reload() -> None:
    log = three_nodes()
    state = log.state
    record = SourceRecord(shards.SHARD_EVENTS, 0, 0, 1, b"js", b'{"type":"NodeLost","job_set":"js","node":"1"}')
    assert shards.apply(state, record, shards.SHARD_EVENTS) == (state, [])
    reloaded = shards.load(shards.dump(state))
    assert shards.dump(reloaded) == shards.dump(state)
    after = shards.apply(reloaded, record._replace(offset=99), shards.SHARD_EVENTS)
    direct = shards.apply(state, record._replace(offset=99), shards.SHARD_EVENTS)
    assert [e.value_bytes() for e in after[1]] == [e.value_bytes() for e in direct[1]]


def test_a_node_registered_again_is_a_new_incarnation_and_a_new_epoch() -> None:
    log = ShardLog()
    log.send("TaskCountSet", tasks=10)
    log.send("NodeJoined", node="1", address="a:1", incarnation=5)
    log.send("NodeJoined", node="2", address="b:1", incarnation=6)
    assert log.send("NodeJoined", node="1", address="a:1", incarnation=5) == []
    log.send("NodeJoined", node="1", address="a:1", incarnation=9)  # its session was lost, and it is back
    plan = log.plans[-1]
    assert plan["joined"] == ["1"] and plan["incarnations"] == {"1": 9, "2": 6} and plan["epoch"] == 4
    log.send("NodeJoined", node="2", address="c:1", incarnation=6)
    assert log.dead[-1]["reason_code"] == "duplicate_node"


def test_stale_membership_changes_nothing() -> None:
    log = ShardLog()
    log.send("TaskCountSet", tasks=10)
    log.send("NodeJoined", node="1", address="a:1", incarnation=5)
    log.send("NodeJoined", node="2", address="b:1", incarnation=9)
    epoch = log.state.epoch
    assert log.send("NodeLost", node="2", incarnation=7) == []  # the loss of an earlier incarnation
    assert log.send("NodeJoined", node="2", address="b:1", incarnation=8) == []  # an earlier registration
    assert log.send("NodesSnapshot", nodes=[{"node": "1", "address": "a:1", "incarnation": 5}], zxid=8) == []
    assert log.state.epoch == epoch and log.state.incarnations == {"1": 5, "2": 9}
    log.send("NodeLost", node="2", incarnation=9)
    assert log.plans[-1]["lost"] == ["2"]


def test_a_snapshot_read_before_a_registration_of_a_node_since_lost_changes_nothing() -> None:
    """A deposed leader read /live (zxid 6) before n2 registered (7); since then n2 and n1 were lost. Its
    snapshot must not bring back n1, whose loss the log has, nor publish an epoch that awaits it."""
    log = ShardLog()
    log.send("TaskCountSet", tasks=10)
    log.send("NodeJoined", node="n1", address="a:1", incarnation=5)
    log.send("NodeJoined", node="n2", address="b:1", incarnation=7)
    log.send("NodeLost", node="n2", incarnation=7)
    log.send("NodeLost", node="n1", incarnation=5)
    epoch = log.state.epoch
    assert log.plans[-1]["nodes"] == {} and log.plans[-1]["released"]
    assert log.send("NodesSnapshot", nodes=[{"node": "n1", "address": "a:1", "incarnation": 5}], zxid=6) == []
    assert log.state.epoch == epoch and dict(log.state.nodes) == {}
    log.send("NodeJoined", node="n3", address="c:1", incarnation=11)  # a stale snapshot cannot drop a live node
    assert log.send("NodesSnapshot", nodes=[], zxid=10) == [] and list(log.state.nodes) == ["n3"]
    assert log.send("NodesSnapshot", nodes=[{"node": "n3", "address": "c:1", "incarnation": 11}], zxid=12) == []
    assert log.state.newest == 12  # a newer snapshot is news, and fences the ones read before it
    assert log.send("NodesSnapshot", nodes=[{"node": "n3", "address": "c:1", "incarnation": 11}], zxid=11) == []
    out = log.send("NodesSnapshot", nodes=[], zxid=13)  # n3's loss, seen by a snapshot: a new epoch
    assert dict(out[0].record)["lost"] == ["n3"]


def test_the_newest_registration_survives_the_table() -> None:
    log = ShardLog()
    log.send("NodeJoined", node="n1", address="a:1", incarnation=5)
    log.send("NodeLost", node="n1", incarnation=5)
    reloaded = shards.load(shards.dump(log.state))
    assert reloaded == log.state and reloaded.newest == 5
    legacy = {k: v for k, v in shards.dump(log.state).items() if k != "newest"}  # stored by an earlier version
    assert shards.load(legacy).newest == 0
