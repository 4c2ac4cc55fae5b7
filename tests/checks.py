"""What the chaos tests check of the recorded outputs and the clients' run logs, each check returning the
violations it found (none: it held), so that a test asserts there are none and the combined-fault bench
(`bench/combined_faults.py`) counts them."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_ENDS = ("JobFinished", "JobRetryScheduled", "JobFailedFinally", "JobCancelled")  # outcomes that end a running attempt


def decision_violations(got: list[dict[str, Any]], topic: str, produced: Iterable[tuple[int, int]],
                        expected: int) -> list[str]:
    """One decision per input record (by cause), `expected` in all, and seq 1..n without gaps per pool."""
    causes = Counter((d["cause"]["topic"], d["cause"]["partition"], d["cause"]["offset"]) for d in got)
    found = [f"{c} decided {n} times" for c, n in causes.items() if n > 1]
    missing = sorted({(topic, part, off) for part, off in produced} - set(causes))
    if missing:
        found.append(f"{len(missing)} inputs undecided, e.g. {missing[:5]}")
    if len(got) != expected:
        found.append(f"{len(got)} decisions, not {expected}")
    by_pool: dict[str, list[int]] = {}
    for d in got:
        by_pool.setdefault(d["pool"], []).append(d["seq"])
    found += [f"pool {p}: seqs {seqs[:10]}..." for p, seqs in by_pool.items() if seqs != list(range(1, len(seqs) + 1))]
    return found


def dispatch_violations(outcomes: list[dict[str, Any]], starts: list[dict[str, Any]], jobs: int,
                        cap: int, worker_caps: Mapping[str, int]) -> list[str]:
    """One start per (uuid, attempt) and one final outcome for each of `jobs` jobs; and, replaying the outputs in
    the order the worker applied their causes (a cause's ends before its starts), never more than `cap` running
    in a namespace nor more than its cap on a worker."""
    found = [f"{k} started {n} times" for k, n in Counter((s["uuid"], s["attempt"]) for s in starts).items() if n > 1]
    ended = Counter(o["uuid"] for o in outcomes if o["final"])
    found += [f"job {uuid} ended {n} times" for uuid, n in ended.items() if n > 1]
    if len(ended) != jobs:
        found.append(f"{len(ended)} jobs ended, not {jobs}")
    by_cause: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for o in [*outcomes, *starts]:
        by_cause.setdefault((o["namespace"], o["cause"]["position"]), []).append(o)
    running: dict[str, dict[str, str]] = {}
    for (namespace, position), outputs in sorted(by_cause.items()):
        now = running.setdefault(namespace, {})
        for o in sorted(outputs, key=lambda o: o["type"] == "JobStarted"):
            if o["type"] == "JobStarted":
                now[o["uuid"]] = o["worker"]
            elif o["type"] in _ENDS:
                now.pop(o["uuid"], None)
        per_worker = Counter(now.values())
        if len(now) > cap or any(per_worker[w] > c for w, c in worker_caps.items()):
            found.append(f"{namespace} at position {position}: {len(now)} running {dict(per_worker)}")
    return found


def scheduler_runs(paths: Iterable[Path], killed_at: Mapping[str, float], until: float
                   ) -> dict[str, list[tuple[float, float, str]]]:
    """Per job, the intervals each scheduler ran it, from the `runs-<id>.jsonl` logs (a killed scheduler's open
    runs end at its kill, a live one's at `until`)."""
    intervals: dict[str, list[tuple[float, float, str]]] = {}
    for path in sorted(paths):
        sid = path.stem.removeprefix("runs-")
        started: dict[str, float] = {}
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["event"] == "start":
                started[entry["job"]] = entry["t"]
            elif entry["job"] in started:
                intervals.setdefault(entry["job"], []).append((started.pop(entry["job"]), entry["t"], sid))
        end = killed_at.get(sid, until)
        for job, t in started.items():
            intervals.setdefault(job, []).append((t, end, sid))
    return intervals


def scheduler_violations(runs: Mapping[str, list[tuple[float, float, str]]]) -> list[str]:
    """A job run by two schedulers at once."""
    found = []
    for job, intervals in runs.items():
        for (_, e1, a), (s2, _, b) in itertools.pairwise(sorted(intervals)):
            if s2 < e1:
                found.append(f"{job} ran on {a} until {e1:.3f} and on {b} from {s2:.3f}")
    return found


def publisher_violations(records: Iterable[Any]) -> tuple[list[str], dict[int, str]]:
    """One publisher at a time on the bridge's topics (SPEC §4), judged from the records (`SourceRecord`s, any
    topics): every record names its publisher and term, in each partition's offset order the terms never decrease,
    and each term is one publisher's. Returns the violations and each term's publisher."""
    violations: list[str] = []
    owner: dict[int, str] = {}
    newest: dict[tuple[str, int], tuple[int, int]] = {}  # (topic, partition) -> (newest term, at offset)
    for r in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        value = json.loads(r.value)
        term, publisher = value.get("term"), value.get("publisher")
        if term is None or publisher is None:
            violations.append(f"{r.topic}:{r.partition}@{r.offset} names no publisher and term: {value}")
            continue
        if owner.setdefault(term, publisher) != publisher:
            violations.append(f"term {term} published by {owner[term]} and {publisher}")
        before, at = newest.get((r.topic, r.partition), (0, -1))
        if term < before:
            violations.append(f"{r.topic}:{r.partition}@{r.offset}: term {term} ({publisher}) after term {before} "
                              f"(@{at})")
        else:
            newest[(r.topic, r.partition)] = (term, r.offset)
    return violations, owner
