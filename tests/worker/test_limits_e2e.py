"""Rejection limits on the real broker: the worker's outputs, its dead letters, and replay agreeing with it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from streams.clients import read_log
from streams.core import groups
from tests.audit.browser import assert_shows_plots
from tests.core.groups.group_log import TOPIC_OF
from tests.helpers import Worker, produce_all, read_committed, tribunal


def script(group: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for sid, n, m in (("A", 1, 3), ("B", 1, 10), ("C", 2, 10)):
        events.append({"type": "SchedulerRegistered", "scheduler": sid, "address": f"{sid}:7000",
                       "fault_tolerance": n, "alarm_threshold": m})
    for i in range(8):
        events.append({"type": "JobCreated", "job": f"j{i}"})
        events.append({"type": "JobAcquired", "job": f"j{i}", "scheduler": "ABC"[i % 2]})
    events += [{"type": "JobReleased", "job": "j0", "scheduler": "A"}, {"type": "SchedulerLost", "scheduler": "A"},
               {"type": "SchedulerOfflineRequested", "scheduler": "B"}, {"type": "JobDeleted", "job": "j1"},
               {"type": "MembershipSnapshot", "schedulers": [], "jobs": {"j2": None, "j9": None}, "offline": []}]
    return [{**e, "group": group} for e in events]


def read_all(kafka: str, topic: str) -> list[Any]:
    return asyncio.run(read_log(kafka, [topic]))


def test_group_events_through_the_worker_agree_with_replay(kafka: str, unique: str, worker: Worker,
                                                           tmp_path: Path) -> None:
    p = f"{unique}."
    records: list[tuple[str, bytes | None, bytes | None]] = []
    for group in ("g1", "g2"):
        records += [(p + TOPIC_OF[e["type"]], group.encode(), json.dumps(e).encode()) for e in script(group)]
    bad = [(p + groups.JOB_EVENTS, b"g1", b"{oops"),
           (p + groups.SCHEDULER_EVENTS, b"g2", json.dumps({"type": "JobCreated", "group": "g2", "job": "x"}).encode())]
    asyncio.run(produce_all(kafka, records + bad))

    health = [json.loads(r.value) for r in
              asyncio.run(read_committed(kafka, p + groups.GROUP_HEALTH, len(records), timeout=120))]
    assert len(health) == len(records), worker.log()[-3000:]
    dead = read_all(kafka, p + groups.JOB_EVENTS + ".dlq") + read_all(kafka, p + groups.SCHEDULER_EVENTS + ".dlq")
    assert sorted(json.loads(d.value)["reason_code"] for d in dead) == ["bad_event", "wrong_topic"]
    # The two input topics are read in arrival order, so job events may land after the snapshot;
    # right after it, though, the group is exactly what the snapshot says.
    [snap] = [h for h in health if h["group"] == "g1" and h["event"] == "MembershipSnapshot"]
    assert (snap["K"], snap["S"], snap["orphans"]) == (2, 0, ["j2", "j9"])
    assert snap["corrections"], "the snapshot disagreed with the log and must say how"
    limits_seen = {json.loads(r.value)["scheduler"]: json.loads(r.value)
                   for r in read_all(kafka, p + groups.REJECTION_LIMITS) if r.key == b"g1/A"}
    assert limits_seen["A"]["live"] is False

    # The worker read two topics in arrival order; every output's cause names its input's position
    # among its group's inputs, so replay from the topics applies them in the very same order.
    replayed = tmp_path / "replayed.jsonl"
    tribunal("audit", "replay", "--from-kafka", "--output", str(replayed), env=worker.env)
    derived = sorted((row["topic"], row["key"], json.dumps(row["value"], sort_keys=True))
                     for row in map(json.loads, replayed.read_text().splitlines()))
    recorded = sorted((r.topic, r.key.decode(), json.dumps(json.loads(r.value), sort_keys=True))
                      for topic in (*groups.OUTPUTS, groups.JOB_EVENTS + ".dlq", groups.SCHEDULER_EVENTS + ".dlq")
                      for r in read_all(kafka, p + topic))
    assert derived == recorded

    ok = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker.env)
    assert f"verified: {len(recorded)} output records of {len(records) + len(bad)} input records agree" in ok.stdout

    page = tmp_path / "g1.html"
    tribunal("audit", "report", "--group", "g1", "--output", str(page), env=worker.env)
    dom = assert_shows_plots(page, tmp_path, plots=1)
    assert "MembershipSnapshot" in dom and "no longer exists" in dom  # the snapshot's corrections, explained
    assert worker.alive
