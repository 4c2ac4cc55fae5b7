"""The strategies: SPEC §6's example, small task counts, and what a join moves under each."""

from __future__ import annotations

import itertools

from streams.core.shards import plans


def test_spec_example_2300_tasks_over_3_nodes() -> None:
    nodes = {"c": "10.0.0.3:9000", "a": "10.0.0.1:9000", "b": "10.0.0.2:9000"}
    assert plans.scope(nodes, 2300) == {"a": ((1, 766),), "b": ((767, 1532),), "c": ((1533, 2300),)}


def test_scope_sorts_by_address_not_by_id() -> None:
    nodes = {"a": "10.0.0.9:9000", "b": "10.0.0.1:9000"}
    assert plans.scope(nodes, 10) == {"a": ((6, 10),), "b": ((1, 5),)}


def test_scope_with_fewer_tasks_than_nodes_gives_them_to_the_last() -> None:
    nodes = {n: n for n in "abc"}
    assert plans.scope(nodes, 2) == {"a": (), "b": (), "c": ((1, 2),)}
    assert plans.scope(nodes, 0) == {"a": (), "b": (), "c": ()}
    assert plans.scope({}, 10) == {}


def test_ring_covers_every_task_once_and_a_join_moves_only_to_the_new_node() -> None:
    nodes = {f"n{i}": f"h{i}" for i in range(5)}
    before = plans.ring(nodes, 10_000)
    cover = plans.segments(before)
    assert cover[0][0] == 1 and cover[-1][1] == 10_000
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(cover))
    after = plans.ring({**nodes, "n5": "h5"}, 10_000)
    changes = plans.changes(before, after)
    assert changes and {new for _, _, _, new in changes} == {"n5"}
    assert plans.moved(before, after) == plans.size(after["n5"])
    assert plans.moved(before, after) < 2 * 10_000 / 6


def test_scope_moves_far_more_than_ring_on_a_join() -> None:
    nodes = {f"n{i}": f"h{i}" for i in range(3)}
    joined = {**nodes, "n3": "h3"}
    scope_moved = plans.moved(plans.scope(nodes, 2300), plans.scope(joined, 2300))
    ring_moved = plans.moved(plans.ring(nodes, 2300), plans.ring(joined, 2300))
    assert scope_moved > 1.5 * ring_moved  # 1,148 against 581: about T/2 against T/(L+1)
    assert ring_moved <= 2 * 2300 // 4


def test_changes_names_old_and_new_owners() -> None:
    before = {"a": ((1, 5),), "b": ((6, 10),)}
    after = {"a": ((1, 3),), "b": ((4, 10),)}
    assert plans.changes(before, after) == [(4, 5, "a", "b")]
    assert plans.moved(before, after) == 2
    assert plans.moved({}, after) == 0
