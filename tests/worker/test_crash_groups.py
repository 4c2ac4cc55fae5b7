"""SIGKILL the worker while scheduler and job events stream in over 10 groups, on both input topics.

The limits fold runs through the same exactly-once path as the decider; this shows it holds for
it too, with two input topics read in arrival order: exactly one group-health record per input
by cause, seq 1..n per group, and `tribunal audit replay --from-kafka --verify` agreeing with every
recorded output (which needs each cause's position to recover the applied order).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from typing import Any

import pytest

from streams.core import groups
from tests.core.groups.group_log import TOPIC_OF
from tests.helpers import Worker, produce_while_killing, read_committed, tribunal

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

GROUPS, EVENTS, KILLS = 10, 4_000, 10


def events(rng: random.Random) -> list[dict[str, Any]]:
    """A plausible stream per group: schedulers come and go, jobs are created, taken and given back."""
    out = []
    for _ in range(EVENTS):
        g = f"g{rng.randrange(GROUPS)}"
        sid, job = f"s{rng.randrange(5)}", f"j{rng.randrange(40)}"
        kind = rng.choice(["SchedulerRegistered", "SchedulerLost", "JobCreated", "JobCreated", "JobDeleted",
                           "JobAcquired", "JobAcquired", "JobReleased", "SchedulerOfflineRequested",
                           "SchedulerOnlineRequested"])
        event: dict[str, Any] = {"type": kind, "group": g}
        if kind.startswith("Scheduler"):
            event["scheduler"] = sid
            if kind == "SchedulerRegistered":
                event |= {"fault_tolerance": 1 + rng.randrange(2), "alarm_threshold": 8}
        else:
            event["job"] = job
            if kind in ("JobAcquired", "JobReleased"):
                event["scheduler"] = sid
        out.append(event)
    return out


def test_sigkill_loses_and_duplicates_no_group_record(kafka: str, unique: str, worker: Worker,
                                                      worker_env: dict[str, str]) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    records = [(p + TOPIC_OF[e["type"]], e["group"].encode(), json.dumps(e).encode()) for e in events(rng)]
    _, kills = produce_while_killing(kafka, records, 250, worker, rng, KILLS, longest=2.0)  # 16 s of input

    got = [json.loads(r.value) for r in asyncio.run(
        read_committed(kafka, p + groups.GROUP_HEALTH, EVENTS, timeout=300))]
    context = f"seed {seed}, {kills} kills; worker log tail:\n{worker.log()[-3000:]}"
    causes = Counter((h["cause"]["topic"], h["cause"]["partition"], h["cause"]["offset"]) for h in got)
    assert len(got) == EVENTS and max(causes.values()) == 1, context
    by_group: dict[str, list[int]] = {}
    for h in got:
        by_group.setdefault(h["group"], []).append(h["seq"])
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_group.values()), context
    positions: dict[str, list[int]] = {}
    for h in got:
        positions.setdefault(h["group"], []).append(h["cause"]["position"])
    assert all(ps == list(range(1, len(ps) + 1)) for ps in positions.values()), context

    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert f"of {EVENTS} input records agree" in verified.stdout, context
