"""The run-log checker finds what it is for: two nodes holding one task at once, and tasks left unrun."""

from __future__ import annotations

from typing import Any

from streams.shards.check import check


def run(node: str, number: str | int, task: int, start: float, end: float | None, held: float | None = None
        ) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [{"event": "start", "node": node, "run": str(number), "task": task, "epoch": 1,
                                    "at": start}]
    if end is not None:
        lines.append({"event": "end", "node": node, "run": str(number), "task": task, "epoch": 1, "at": end,
                      "held_until": end if held is None else held, "outcome": "done"})
    return lines


def test_overlapping_runs_of_one_task_are_found_and_disjoint_ones_are_not() -> None:
    lines = run("a", 1, 1, 0.0, 1.0) + run("b", 1, 1, 1.5, 2.0) + run("b", 2, 2, 0.0, 1.0) + run("a", 2, 2, 0.5, 0.8)
    found = check(lines, tasks=2, since=0.0, until=2.0)
    assert [(x.node, y.node, x.task) for x, y in found.overlaps] == [("b", "a", 2)]


def test_a_frozen_node_holds_only_until_its_lease_and_a_killed_one_until_it_died() -> None:
    frozen = run("a", 1, 1, 0.0, 9.0, held=2.0) + run("b", 1, 1, 3.0, 4.0)
    assert check(frozen, tasks=1, since=0.0, until=9.0).overlaps == []
    killed = run("a", 1, 1, 0.0, None) + run("b", 1, 1, 3.0, 4.0)
    assert check(killed, tasks=1, since=0.0, until=9.0, died={"a": [2.5]}).overlaps == []
    assert len(check(killed, tasks=1, since=0.0, until=9.0).overlaps) == 1  # not told it died: held to the end


def test_gaps_count_from_the_window_edges_and_a_task_never_run_is_one_gap() -> None:
    found = check(run("a", 1, 1, 2.0, 2.5) + run("a", 2, 1, 3.0, 3.5), tasks=2, since=0.0, until=10.0)
    assert found.gaps == {1: 7.0, 2: 10.0}
    assert found.worst_gap() == (2, 10.0)
