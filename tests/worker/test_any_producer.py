"""Records from any producer, on the real broker: Debian's kcat (librdkafka, CRC32 keys, random for
no key), aiokafka on a wrong partition, keyless limits events; and `tribunal topics redrive`.

Before routing, all of the kcat metrics went to the dead-letter topic as `no_policy` (the policy
lived on another partition) and a second state grew for the pool on another partition.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams.clients import envelope, read_log
from streams.core.folds import FOLDS
from streams.kafka import partition_for
from tests.core.pools.builders import seed_policy
from tests.helpers import Worker, agreed, produce_all, read_committed, running, tribunal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PARTITIONS = 4  # conftest's worker_env


def kcat(kafka: str, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    """Produce with librdkafka's default partitioner, one record per value."""
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed: `make test-setup` installs it from Debian")
    args = ["kcat", "-b", kafka, "-P", "-t", topic]
    lines = values
    if key is not None:
        args += ["-K", "\t"]
        lines = [key + b"\t" + v for v in values]
    subprocess.run(args, input=b"\n".join(lines) + b"\n", check=True, timeout=60)


def foreign_pool() -> str:
    """A pool id that librdkafka's CRC32 puts on another partition than murmur2 does."""
    return next(p for p in (f"pool-{i}" for i in range(100))
                if zlib.crc32(p.encode()) % PARTITIONS != partition_for(p, PARTITIONS))


def committed(kafka: str, topic: str, expected: int, timeout: float = 120) -> list[Any]:
    return asyncio.run(read_committed(kafka, topic, expected, timeout=timeout))


def test_every_producer_is_decided_once_in_one_state_per_key(kafka: str, unique: str, worker: Worker,
                                                             worker_env: dict[str, str]) -> None:
    p = f"{unique}."
    foreign = foreign_pool()
    wrong = (partition_for(foreign, PARTITIONS) + 1) % PARTITIONS
    tribunal("pools", "policy", "apply", str(EXAMPLES / "decider-pool-a.yaml"), "--pool", "default", env=worker_env)
    asyncio.run(produce_all(kafka, [(p + "policies", foreign.encode(), json.dumps(seed_policy()).encode())]))
    assert len(committed(kafka, p + "scaling-decisions", 2)) == 2, worker.log()[-3000:]

    metrics = [envelope(app, value, "plugin_decider") for app, value in
               [("ats", 55), ("hadoop", 70), ("ats", 75), ("ats", 30), ("Hadoop", 90), ("ats", 45), ("ats", 65),
                ("hadoop", 20)]]
    kcat(kafka, p + "plugin_decider", metrics)  # the seed's producers: no key at all
    kcat(kafka, p + "plugin_decider", metrics[:6], key=foreign.encode())  # CRC32 of the key

    async def aiokafka_on_a_wrong_partition() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=kafka, enable_idempotence=True)
        await producer.start()
        try:
            for value in metrics[:4]:
                await producer.send_and_wait(p + "plugin_decider", value, key=foreign.encode(), partition=wrong)
        finally:
            await producer.stop()

    asyncio.run(aiokafka_on_a_wrong_partition())
    group_events = [{"type": "SchedulerRegistered", "group": "g1", "scheduler": "A"},
                    *({"type": "JobCreated", "group": "g1", "job": f"j{i}"} for i in range(3))]
    kcat(kafka, p + "scheduler-events", [json.dumps(group_events[0]).encode()])
    kcat(kafka, p + "job-events", [json.dumps(e).encode() for e in group_events[1:]])

    context = f"worker log tail:\n{worker.log()[-3000:]}"
    decided = [json.loads(r.value) for r in committed(kafka, p + "scaling-decisions", 2 + 8 + 6 + 4)]
    health = [json.loads(r.value) for r in committed(kafka, p + "group-health", 4)]
    inputs = asyncio.run(read_log(kafka, [p + "plugin_decider"]))
    assert len(inputs) == 18
    assert {r.partition for r in inputs if r.key is None} != {partition_for("default", PARTITIONS)}, \
        "kcat put every keyless record on the default pool's partition: nothing was routed"

    # Every metric decided exactly once, by cause; nothing dead-lettered.
    causes = Counter((d["cause"]["partition"], d["cause"]["offset"]) for d in decided[2:])
    assert set(causes) == {(r.partition, r.offset) for r in inputs} and set(causes.values()) == {1}, context
    assert not committed(kafka, p + "plugin_decider.dlq", 1, timeout=3)
    by_pool: dict[str, list[int]] = {}
    for d in decided:
        by_pool.setdefault(d["pool"], []).append(d["seq"])
    assert by_pool == {"default": list(range(1, 10)), foreign: list(range(1, 12))}, context
    # Keyless records spread over partitions have no order between them (Kafka orders a partition
    # only), so which outcome each gets depends on arrival; that every one is decided does not.
    default = [d for d in decided if d["pool"] == "default"]
    assert [(h["group"], h["K"], h["S"]) for h in health][-1] == ("g1", 3, 1), context

    # One state per key: each table key is written on exactly one changelog partition, its own.
    changelogs = [t for t in asyncio.run(_topics(kafka)) if t.startswith(unique) and t.endswith("-state-changelog")]
    assert len(changelogs) == len(FOLDS)  # each fold's `*-state` table
    for record in asyncio.run(read_log(kafka, changelogs)):
        key = json.loads(record.key)
        assert record.partition == partition_for(key, PARTITIONS), (record.topic, key, record.partition)
    state = json.loads(tribunal("pools", "state", "--pool", "default", "--json", env=worker_env).stdout)
    assert {a["app"]: a["instances"] for a in state["decider"]["apps"]} == default[-1]["instances"]

    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert re.search(r"verified: \d+ output records of 24 input records agree", verified.stdout), verified.stdout


async def _topics(kafka: str) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        return list(await admin.list_topics())
    finally:
        await admin.close()


def test_dead_letters_redriven_once_their_cause_is_fixed_are_decided_once(kafka: str, unique: str, worker: Worker,
                                                                          worker_env: dict[str, str]) -> None:
    p = f"{unique}."
    early = [(p + "plugin_decider", b"late", envelope("ats", v, "plugin_decider")) for v in (55, 75, 30)]
    asyncio.run(produce_all(kafka, [*early, (p + "plugin_decider", b"late", b"not json")]))
    letters = [json.loads(r.value) for r in committed(kafka, p + "plugin_decider.dlq", 4)]
    assert Counter(x["reason_code"] for x in letters) == {"no_policy": 3, "bad_envelope": 1}, worker.log()[-3000:]

    tribunal("pools", "policy", "apply", str(EXAMPLES / "decider-pool-a.yaml"), "--pool", "late", env=worker_env)
    first = tribunal("topics", "redrive", "--topic", "plugin_decider.dlq", "--reason", "no_policy", env=worker_env)
    assert "redriven 3, redriven before 0, left by the filters 1" in first.stdout, first.stdout
    again = tribunal("topics", "redrive", "--topic", "plugin_decider.dlq", "--reason", "no_policy", env=worker_env)
    assert "redriven 0, redriven before 3, left by the filters 1" in again.stdout, again.stdout

    decided = [json.loads(r.value) for r in committed(kafka, p + "scaling-decisions", 4)]
    time.sleep(3)  # anything decided twice would follow within a commit interval or two
    decided = [json.loads(r.value) for r in committed(kafka, p + "scaling-decisions", 5, timeout=5)]
    assert [(d["seq"], d["outcome"], d["trigger"]["metrical"]) for d in decided] == \
        [(1, "policy", None), (2, "steady", 55), (3, "partial", 75), (4, "idle", 30)], worker.log()[-3000:]
    redriven = [r for r in asyncio.run(read_log(kafka, [p + "plugin_decider"])) if r.offset >= 4]
    assert [(r.key, r.value) for r in redriven] == [(k, v) for _, k, v in early]

    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    # 4 dead letters, 4 decisions, and the instances of the 2 apps the policy set and the partial grant changed
    assert agreed(verified.stdout, 8) == 4 + 4 + 2 + 2, verified.stdout


def test_a_quiet_worker_is_not_restarted_for_the_markers_forwarding_leaves(kafka: str, unique: str,
                                                                           worker_env: dict[str, str],
                                                                           tmp_path: Path) -> None:
    """Forwards are transactional: a commit marker follows the last one, and the stall watchdog took
    it for a record waiting, restarting an idle worker every STALL_TIMEOUT."""
    env = {**worker_env, "TRIBUNAL_STALL_TIMEOUT": "2"}
    tribunal("topics", "create", env=env)
    with running(Worker(env, tmp_path / "worker.log")) as worker:
        p = f"{unique}."
        wrong = (partition_for("q", PARTITIONS) + 1) % PARTITIONS
        asyncio.run(produce_all(kafka, [(p + "policies", b"q", json.dumps(seed_policy()).encode())]))
        asyncio.run(produce_all(kafka, [(p + "plugin_decider", b"q", envelope("ats", v, "plugin_decider"))
                                        for v in (55, 75)], partitioner=lambda key: wrong))
        assert len(committed(kafka, p + "scaling-decisions", 3)) == 3, worker.log()[-3000:]
        time.sleep(13)  # two watchdog rounds (every 5 s) past the stall timeout
        assert "restarting the worker in place" not in worker.log(), worker.log()[-3000:]
