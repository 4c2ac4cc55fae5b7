"""The batched hot path (streams/worker/checkpoint.py): the same bytes out whatever the batch size.

One log (decider policies, metrics for 12 pools with malformed records among them, scheduler
group events) is folded by three workers that write at most 1, 7 and 1,000 records per batch.
Each starts on a backlog, so batches really are as large as allowed (the worker's `/checkpoint/`
page says how large they were). The committed outputs must be byte-identical across the three,
apart from the topic prefix in causes, and each must pass `tribunal audit replay --from-kafka --verify`.
No worker may have had a transactional write refused by the broker and retried (see the checkpoint's
`flush`).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.request
from pathlib import Path
from typing import Any

from streams.clients import envelope
from streams.core import groups
from tests.core.groups.group_log import TOPIC_OF
from tests.helpers import Worker, produce_all, read_committed, running, tribunal, until
from tests.worker.test_crash import pool_policy

POOLS, METRICS = 12, 1_500
GROUPS, SCHEDULERS, JOBS = ("g1", "g2"), 4, 60
BROKEN = b"{not an envelope"
# The first record's timestamp (ms): the same in every run, and recent. A fixed date in the past made
# the broker's retention check (7 days by default, first run 30 s after start) delete the inputs
# between folding and `replay --verify`, which then read nothing of them.
FIRST = int(time.time()) * 1000


Record = tuple[str, bytes | None, bytes | None]  # (logical topic, key, value)


def the_log(seed: int) -> tuple[list[Record], list[Record]]:
    """The same two phases for every batch size: set-up (policies, scheduler registrations), then load.

    Kafka orders a partition, not two topics: a key's records on two input topics may be folded
    in either interleaving. So the set-up is folded before the load is produced, and within the
    load each fold reads a single topic (metrics; job events), whose order is the log's.
    """
    rng = random.Random(seed)
    setup: list[Record] = [
        ("policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode()) for i in range(POOLS)]
    load: list[Record] = []
    for _ in range(METRICS):
        pool = f"pool-{rng.randrange(POOLS):02d}".encode()
        if rng.random() < 0.03:
            load.append(("plugin_decider", pool, BROKEN))
        else:
            load.append(("plugin_decider", pool, envelope(rng.choice(["ats", "hadoop", "redis", "spark"]),
                                                          rng.randrange(101), "plugin_decider")))
    for group in GROUPS:
        for i in range(SCHEDULERS):
            event = {"type": "SchedulerRegistered", "group": group, "scheduler": f"s{i}", "fault_tolerance": 1 + i % 2}
            setup.append((TOPIC_OF[event["type"]], group.encode(), json.dumps(event).encode()))
        for j in range(JOBS):
            event = {"type": "JobCreated", "group": group, "job": f"job-{j}"}
            load.append((TOPIC_OF[event["type"]], group.encode(), json.dumps(event).encode()))
    return setup, load


OUTPUTS = ("scaling-decisions", "plugin_decider.dlq", *groups.OUTPUTS)


def committed(kafka: str, prefix: str, topic: str) -> list[Any]:
    return asyncio.run(read_committed(kafka, prefix + topic, 1 << 30, timeout=3))


def stats(env: dict[str, str]) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{env['TRIBUNAL_WEB_PORT']}/checkpoint/", timeout=10) as page:
        return json.load(page)


def wait_for(kafka: str, prefix: str, counts: dict[str, int], seconds: float = 240) -> None:
    """Until each topic holds its count of committed records (as many as the inputs folded)."""
    until(lambda: all(len(asyncio.run(read_committed(kafka, prefix + topic, n, timeout=3))) >= n
                      for topic, n in counts.items()), f"every input to be folded: {counts}", seconds, every=0)


def run_with_batches_of(kafka: str, worker_env: dict[str, str], unique: str, size: int,
                        log: tuple[list[Record], list[Record]], tmp_path: Path
                        ) -> tuple[dict[str, list[bytes]], dict[str, Any]]:
    prefix = f"{unique}b{size}."
    env = {**worker_env, "TRIBUNAL_TOPIC_PREFIX": prefix, "TRIBUNAL_APP_ID": f"{unique}b{size}",
           "TRIBUNAL_DATA_DIR": str(tmp_path / f"w{size}"), "TRIBUNAL_MAX_BATCH": str(size),
           "TRIBUNAL_RECORD_TIME": "producer"}  # the test stamps its records: alike in every run
    tribunal("topics", "create", env=env)
    setup, load = log
    with running(Worker(env, tmp_path / f"w{size}.log")):
        # causes carry timestamps: stamped alike in every run
        asyncio.run(produce_all(kafka, [(prefix + t, k, v) for t, k, v in setup], first_timestamp=FIRST))
        wait_for(kafka, prefix, {"scaling-decisions": POOLS, groups.GROUP_HEALTH: len(GROUPS) * SCHEDULERS})
        asyncio.run(produce_all(kafka, [(prefix + t, k, v) for t, k, v in load], first_timestamp=FIRST + len(setup)))
        dead = sum(1 for t, _, v in load if t == "plugin_decider" and v == BROKEN)
        wait_for(kafka, prefix, {"scaling-decisions": POOLS + METRICS - dead, "plugin_decider.dlq": dead,
                                 groups.GROUP_HEALTH: len(GROUPS) * (SCHEDULERS + JOBS)})
        seen = stats(env)
        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=env)
        assert "verified:" in verified.stdout, verified.stdout + verified.stderr
    # The broker verifies transactional writes (KIP-890): a write still in flight when its
    # producer's transaction takes offsets is refused once and sent again after a backoff, which
    # the checkpoint avoids by waiting for acknowledgements first.
    retried = [line for line in (tmp_path / f"w{size}.log").read_text().splitlines() if "NotEnoughReplicas" in line]
    assert not retried, f"batches of {size}: {len(retried)} writes refused and retried, e.g. {retried[0]}"
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
    assert reference["plugin_decider.dlq"] and reference[groups.GROUP_HEALTH]
    for size in (7, 1000):
        for topic in OUTPUTS:
            assert runs[size][0][topic] == reference[topic], f"batches of {size}: {topic} differs"
