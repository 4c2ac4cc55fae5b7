"""The batched hot path (streams/agents/checkpoint.py): the same bytes out whatever the batch size.

One log (decider policies, metrics for 12 pools with malformed records among them, scheduler
group events) is folded by three workers that write at most 1, 7 and 1,000 records per batch.
Each starts on a backlog, so batches really are as large as allowed (the worker's `/checkpoint/`
page says how large they were). The committed outputs must be byte-identical across the three,
apart from the topic prefix in causes, and each must pass `tribunal replay --from-kafka --verify`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streams.core import limits
from streams.io import envelope
from tests.agents.test_crash import pool_policy
from tests.core.limits_log import TOPIC_OF
from tests.helpers import Worker, produce_all, read_committed, tribunal

pytestmark = pytest.mark.integration

POOLS, METRICS = 12, 1_500


def the_log(seed: int) -> list[tuple[str, bytes | None, bytes | None]]:
    """(logical topic, key, value): the same for every batch size."""
    rng = random.Random(seed)
    log: list[tuple[str, bytes | None, bytes | None]] = [
        ("policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode()) for i in range(POOLS)]
    for _ in range(METRICS):
        pool = f"pool-{rng.randrange(POOLS):02d}".encode()
        if rng.random() < 0.03:
            log.append(("plugin_decider", pool, b"{not an envelope"))
        else:
            log.append(("plugin_decider", pool, envelope(rng.choice(["ats", "hadoop", "redis", "spark"]),
                                                         rng.randrange(101), "plugin_decider")))
    for group in ("g1", "g2"):
        for i in range(4):
            event = {"type": "SchedulerRegistered", "group": group, "scheduler": f"s{i}", "fault_tolerance": 1 + i % 2}
            log.append((TOPIC_OF[event["type"]], group.encode(), json.dumps(event).encode()))
        for j in range(60):
            event = {"type": "JobCreated", "group": group, "job": f"job-{j}"}
            log.append((TOPIC_OF[event["type"]], group.encode(), json.dumps(event).encode()))
    return log


OUTPUTS = ("scaling-decisions", "plugin_decider.dlq", *limits.OUTPUTS)


def committed(kafka: str, prefix: str, topic: str) -> list[Any]:
    return asyncio.run(read_committed(kafka, prefix + topic, 1 << 30, timeout=8))


def stats(env: dict[str, str]) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{env['TRIBUNAL_WEB_PORT']}/checkpoint/", timeout=10) as page:
        return json.load(page)


def run_with_batches_of(kafka: str, worker_env: dict[str, str], unique: str, size: int, log: list[Any],
                        tmp_path: Path) -> tuple[dict[str, list[bytes]], dict[str, Any]]:
    prefix = f"{unique}b{size}."
    env = {**worker_env, "TRIBUNAL_TOPIC_PREFIX": prefix, "TRIBUNAL_APP_ID": f"{unique}b{size}",
           "TRIBUNAL_DATA_DIR": str(tmp_path / f"w{size}"), "TRIBUNAL_MAX_BATCH": str(size)}
    tribunal("topics", "create", env=env)
    asyncio.run(produce_all(kafka, [(prefix + topic, key, value) for topic, key, value in log]))
    worker = Worker(env, tmp_path / f"w{size}.log")
    worker.start()
    try:
        expected = POOLS + METRICS
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # every input folded and committed
            decided = asyncio.run(read_committed(kafka, prefix + "scaling-decisions", 1 << 30, timeout=3))
            dead = asyncio.run(read_committed(kafka, prefix + "plugin_decider.dlq", 1 << 30, timeout=1))
            if len(decided) + len(dead) >= expected:
                break
        seen = stats(env)
        verified = tribunal("replay", "--from-kafka", "--verify", env=env)
        assert "verified:" in verified.stdout, verified.stdout + verified.stderr
    finally:
        worker.stop()
    out = {}
    for topic in OUTPUTS:
        records = committed(kafka, prefix, topic)
        out[topic] = sorted(r.value.replace(prefix.encode(), b"<prefix>") for r in records)
    return out, seen


def test_outputs_are_the_same_bytes_whatever_the_batch_size(kafka: str, unique: str, worker_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    log = the_log(seed=5)
    runs = {size: run_with_batches_of(kafka, worker_env, unique, size, log, tmp_path) for size in (1, 7, 1000)}
    assert runs[1][1]["largest"] == 1
    assert 1 < runs[7][1]["largest"] <= 7, runs[7][1]
    assert runs[1000][1]["largest"] > 7, runs[1000][1]
    reference = runs[1][0]
    assert len(reference["scaling-decisions"]) + len(reference["plugin_decider.dlq"]) == POOLS + METRICS
    assert reference["plugin_decider.dlq"] and reference[limits.GROUP_HEALTH]
    for size in (7, 1000):
        for topic in OUTPUTS:
            assert runs[size][0][topic] == reference[topic], f"batches of {size}: {topic} differs"
