"""40,000 bad records of every kind, interleaved with valid ones on every input topic, through one worker.

The worker must not crash or restart, every bad record must be on its topic's dead-letter topic
with a reason (exactly the bad ones: found by cause), and every valid record must be answered: an
output caused by it, a `SilentInput` for one that changed nothing (a stale tick or ack).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter

import pytest

from tests.helpers import Worker, produce_all, read_committed
from tests.worker import fuzz

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

BAD, VALID_EVERY = 40_000, 10  # a valid record after every tenth bad one
OUTPUTS = ("scaling-decisions", "justice-outcomes", "rejection-limits", "group-health", "job-offers", "alerts",
           "job-starts", "job-outcomes", "dispatcher-health", "shard-plans", "silent-inputs")


def test_bad_records_of_every_kind_are_all_dead_lettered_and_every_valid_one_answered(
        kafka: str, unique: str, worker: Worker) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    setup = [(p + topic, key, value) for topic, records in fuzz.setup().items() for key, value in records]
    asyncio.run(produce_all(kafka, setup))

    records: list[tuple[str, bytes | None, bytes | None]] = []
    kinds: list[str | None] = []  # None: valid
    made: Counter[str] = Counter()
    for i in range(BAD):
        topic = fuzz.TOPICS[i % len(fuzz.TOPICS)]
        kind = fuzz.KINDS[(i // len(fuzz.TOPICS)) % len(fuzz.KINDS)]
        records.append((p + topic, *fuzz.bad(topic, kind, rng)))
        kinds.append(kind)
        if i % VALID_EVERY == VALID_EVERY - 1:
            made[topic] += 1
            records.append((p + topic, *fuzz.valid(topic, made[topic])))
            kinds.append(None)
    for topic in fuzz.TOPICS:  # one megabyte record per topic, somewhere in the stream
        at = rng.randrange(len(records))
        records.insert(at, (p + topic, *fuzz.huge_body(topic, rng)))
        kinds.insert(at, "huge_body")
    placed = asyncio.run(produce_all(kafka, records))

    bad = {(t, part, off) for (t, _, _), (part, off), k in zip(records, placed, kinds, strict=True) if k}
    valid = {(t, part, off) for (t, _, _), (part, off), k in zip(records, placed, kinds, strict=True) if not k}
    dead: list[dict[str, object]] = []
    for topic in fuzz.TOPICS:
        expected = sum(1 for (t, _, _) in bad if t == p + topic)
        dead += [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{p}{topic}.dlq", expected,
                                                                           timeout=300))]
    awaited = valid
    caused: set[tuple[str, int, int]] = set()
    for _ in range(12):  # until every valid record's output is committed (the last ones may be in flight)
        outputs = [json.loads(r.value) for topic in OUTPUTS
                   for r in asyncio.run(read_committed(kafka, p + topic, 10**9, timeout=3))]
        caused = {(o["cause"]["topic"], o["cause"]["partition"], o["cause"]["offset"]) for o in outputs}
        if awaited <= caused:
            break
    log = worker.log()
    context = f"seed {seed}; worker log tail:\n{log[-3000:]}"

    dead_causes = Counter((d["cause"]["topic"], d["cause"]["partition"], d["cause"]["offset"])  # type: ignore[index]
                          for d in dead)
    assert max(dead_causes.values()) == 1, context
    missing = bad - set(dead_causes)
    assert not missing, f"{len(missing)} bad records not dead-lettered, e.g. {sorted(missing)[:5]}; {context}"
    wrongly = set(dead_causes) - bad
    assert not wrongly, f"{len(wrongly)} valid records dead-lettered, e.g. {sorted(wrongly)[:5]}; {context}"
    assert all(d["reason_code"] and d["reason"] for d in dead)

    undecided = awaited - caused
    assert not undecided, f"{len(undecided)} valid records unanswered, e.g. {sorted(undecided)[:5]}; {context}"
    assert worker.alive and worker.starts == 1, context
    assert "Crashed" not in log and "restarting" not in log.lower(), context
