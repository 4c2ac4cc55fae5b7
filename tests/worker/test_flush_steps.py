"""A SIGKILL at each step of a flush leaves the whole batch or none of it (issue 59).

Each source partition's flush (`Checkpoint._commit_each`): its states dumped, its records sent, acknowledged,
its offsets added to its transaction, the transaction committed, the states kept in the local store (which the
next start keeps: the killed worker's successor uses the same data directory). The worker kills itself at
one such step (`streams.worker.failpoints`), the N-th time any partition's flush reaches it,
while metrics stream in; started again without the failpoint, it must have decided every input exactly once
(by cause, `seq` 1..n per pool) and `tribunal audit replay --from-kafka --verify` must agree with every output.
A flush that let offsets count before their records' transaction committed loses decisions here, one that
committed records without their offsets decides twice, and one that kept states in the store before their
commit loses the aborted batch's decisions.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from pathlib import Path

import pytest

from streams.worker import failpoints
from tests.helpers import Worker, produce_all, read_committed, running, tribunal, until
from tests.worker.test_crash import pool_policy, random_metrics, verified_exactly_once

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

POOLS, RECORDS, RATE = 8, 1_500, 500.0
PASS = 5  # the pass that kills: with metrics streaming in, some partitions' flushes committed before


@pytest.mark.parametrize("step", failpoints.STEPS)
def test_a_kill_at_each_step_of_a_flush_loses_and_duplicates_nothing(kafka: str, unique: str, step: str,
                                                                      worker_env: dict[str, str],
                                                                      tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    tribunal("topics", "create", env=worker_env)
    # The policies first, each decided: Kafka orders a partition, not two topics, and a metric folded before its
    # pool's policy decides nothing.
    policies = [(p + "policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode()) for i in range(POOLS)]
    worker = Worker(worker_env, tmp_path / "worker.log")
    with running(worker):
        asyncio.run(produce_all(kafka, policies))
        assert len(asyncio.run(read_committed(kafka, p + "scaling-decisions", POOLS, timeout=120))) == POOLS, \
            worker.log()[-3000:]
    doomed = Worker({**worker_env, failpoints.ENV: f"{step}:{PASS}"}, tmp_path / "worker.log")
    doomed.start()
    metrics = random_metrics(p, rng, RECORDS, POOLS)
    produced: list[tuple[int, int]] = []
    producing = threading.Thread(target=lambda: produced.extend(asyncio.run(produce_all(kafka, metrics, RATE))))
    producing.start()
    try:
        until(lambda: not doomed.alive, lambda: f"the worker to die at {step}:\n{doomed.log()[-3000:]}", timeout=120)
        assert doomed.proc is not None and doomed.proc.returncode == -9, doomed.log()[-3000:]  # by its failpoint
        worker.start()
        producing.join()
        verified_exactly_once(kafka, p, produced, POOLS + RECORDS, worker_env, lambda: (
            f"killed at {step}:{PASS}, seed {seed}; worker log tail:\n{worker.log()[-3000:]}"))
    finally:
        producing.join()
        doomed.stop()
        worker.stop()
