"""SIGKILL the worker and the ticker while jobs are assigned, start, time out and are retried.

The dispatcher through the same exactly-once path as the other folds, with its clock on the log:
exactly one JobStarted per (uuid, attempt) and one final outcome per job under read_committed,
the namespace's and the worker's caps never exceeded in the output streams read in applied
order, and `tribunal audit replay --from-kafka --verify` agreeing with every recorded output.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from streams.core import dispatch
from tests.checks import dispatch_violations
from tests.helpers import Service, Worker, kill_repeatedly, produce_all, read_committed, tribunal, wait_until_ready

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

NAMESPACES, ASSIGNS, KILLS = 3, 40, 4
CAP, W0_CAP, TIMEOUT_MS = 4, 2, 300


def commands(rng: random.Random, now: int) -> tuple[list[dict[str, Any]], int]:
    """Caps first, then assigns of 1-4 jobs over three workers; every job times out (nobody finishes them),
    is retried once and fails for good."""
    out: list[dict[str, Any]] = []
    for n in range(NAMESPACES):
        out += [{"type": "MaxThreadsSet", "namespace": f"ns{n}", "max": CAP},
                {"type": "WorkerMaxSet", "namespace": f"ns{n}", "worker": "w0", "max": W0_CAP}]
    jobs = 0
    for i in range(ASSIGNS * NAMESPACES):
        count = rng.randint(1, 4)
        jobs += count
        start = now + rng.randint(0, 5_000)
        out.append({"type": "JobsAssigned", "namespace": f"ns{rng.randrange(NAMESPACES)}",
                    "worker": f"w{rng.randrange(3)}", "start": start, "end": start + rng.randint(0, 3_000),
                    "jobs": [{"external_id": f"{i}-{j}", "max_retries": 1, "timeout_ms": TIMEOUT_MS}
                             for j in range(count)]})
    return out, jobs


def test_sigkills_of_worker_and_ticker_lose_and_duplicate_no_start(kafka: str, zookeeper: str, unique: str,
                                                                   worker: Worker, worker_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {**worker_env, "ZOOKEEPER_HOSTS": zookeeper}
    ticker = Service(env, tmp_path / "ticker.log", "dispatch", "ticker", "--root", f"/{unique}", "--session-timeout",
                     "4")
    ticker.start()
    values, total = commands(rng, int(time.time() * 1000))
    records = [(f"{unique}.{dispatch.DISPATCH_COMMANDS}", v["namespace"].encode(), json.dumps(v).encode())
               for v in values]
    producer = threading.Thread(target=lambda: asyncio.run(produce_all(kafka, records, rate=15)))  # ~8 s
    producer.start()

    def kill_the_ticker() -> None:
        for _ in range(2):
            time.sleep(rng.uniform(2, 5))
            ticker.kill()
            ticker.start()

    ticker_killer = threading.Thread(target=kill_the_ticker)
    ticker_killer.start()
    kills = kill_repeatedly(worker, producer, rng, KILLS, longest=3.0)
    producer.join()
    ticker_killer.join()
    wait_until_ready(worker, kills + 1)
    context = f"seed {seed}, {kills} worker kills; worker log tail:\n{worker.log()[-3000:]}\n{ticker.log()[-1500:]}"
    try:
        # per job: timed out, retry scheduled, timed out, failed for good; and one JobsAccepted per assign
        everything = [json.loads(r.value) for r in asyncio.run(read_committed(
            kafka, f"{unique}.{dispatch.JOB_OUTCOMES}", 4 * total + ASSIGNS * NAMESPACES, timeout=240))]
    finally:
        ticker.stop()
    outcomes = [o for o in everything if o["type"] != "JobsAccepted"]
    starts = [json.loads(r.value) for r in asyncio.run(read_committed(
        kafka, f"{unique}.{dispatch.JOB_STARTS}", 2 * total, timeout=60))]

    # exactly once: one start per (uuid, attempt), one final outcome per job, every job tried twice; the caps
    violations = dispatch_violations(outcomes, starts, total, CAP, {"w0": W0_CAP})
    assert not violations, f"{violations[:5]}; {context}"
    assert len(starts) == 2 * total and len(outcomes) == 4 * total, context
    assert {o["type"] for o in outcomes if o["final"]} == {"JobFailedFinally"}, context

    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert "verified:" in verified.stdout and "agree" in verified.stdout, context
