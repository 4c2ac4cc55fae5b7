"""Reading shard nodes' run logs: was any task run by two nodes at once, and how long did any go unrun?

A run holds its task from its start until `held_until` (its end, or when its node's lease ran
out if that came first: a frozen node). A run with no end line belongs to a node that was killed:
it held the task until the node died (`died`), or, not told, until the end of the observation.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Held:
    node: str
    run: str
    task: int
    epoch: int
    start: float
    until: float
    outcome: str
    failover: bool


@dataclass
class Findings:
    runs: list[Held]
    overlaps: list[tuple[Held, Held]] = field(default_factory=list)
    gaps: dict[int, float] = field(default_factory=dict)  # task -> its longest time without a run start
    refused: int = 0

    @property
    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self.runs:
            counts[run.outcome] = counts.get(run.outcome, 0) + 1
        return dict(sorted(counts.items()))

    def worst_gap(self) -> tuple[int, float]:
        return max(self.gaps.items(), key=lambda item: item[1], default=(0, 0.0))


def read(paths: Iterable[Path]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in paths:
        if path.exists():
            lines.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return lines


def check(lines: list[dict[str, Any]], tasks: int, since: float, until: float,
          died: Mapping[str, list[float]] | None = None) -> Findings:
    """Runs from the log lines, the pairs of runs of one task that overlap, and each task's longest gap
    between run starts within [since, until] (counting from `since` and to `until`)."""
    died = died or {}
    ends = {(line["node"], line["run"], line["task"]): line for line in lines if line["event"] == "end"}
    runs = []
    for line in lines:
        if line["event"] != "start":
            continue
        end = ends.get((line["node"], line["run"], line["task"]))
        if end is not None:
            held, outcome = float(end["held_until"]), str(end["outcome"])
        else:
            deaths = [t for t in died.get(line["node"], ()) if t >= line["at"]]
            held, outcome = (min(deaths), "killed") if deaths else (until, "unended")
        runs.append(Held(line["node"], line["run"], line["task"], line["epoch"], float(line["at"]), held, outcome,
                         bool(line.get("failover"))))
    found = Findings(runs, refused=sum(1 for line in lines if line["event"] == "refused"))
    by_task: dict[int, list[Held]] = {}
    for run in runs:
        by_task.setdefault(run.task, []).append(run)
    for task in range(1, tasks + 1):
        ordered = sorted(by_task.get(task, []), key=lambda r: r.start)
        latest: Held | None = None
        for run in ordered:
            if latest is not None and run.start < latest.until:
                found.overlaps.append((latest, run))
            if latest is None or run.until > latest.until:
                latest = run
        starts = [since] + [r.start for r in ordered if since <= r.start <= until] + [until]
        found.gaps[task] = max(b - a for a, b in itertools.pairwise(starts))
    return found
