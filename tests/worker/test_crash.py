"""SIGKILL the worker at random moments while 20,000 metrics stream in over 20 pools.

Afterwards a read_committed consumer must see exactly one decision per input record (by cause),
`seq` 1..n without gaps per pool, the very decisions `tribunal audit replay` derives from the same
input exported from the topics, and `tribunal audit replay --from-kafka --verify` must agree.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams.audit.whatif import substance
from streams.clients import envelope
from streams.kafka import partition_for
from streams.lines import export_row, records_of
from tests.checks import decision_violations
from tests.core.pools.builders import app
from tests.helpers import Worker, agreed, produce_all, produce_while_killing, read_committed, tribunal

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

POOLS, RECORDS, KILLS = 20, 20_000, 10  # kills land mid-batch: a batch is being folded or written nearly always
PARTITIONS = 4  # conftest's worker_env


def pool_policy(i: int) -> dict[str, Any]:
    apps = [app("ats", 1, 2), app("hadoop", 2, 2), app("redis", 3, 1), app("spark", 5, 0)]
    return {"kind": "decider", "version": f"crash-{i}", "capacity": 24,
            "initial": {"ats": 5, "hadoop": 5, "redis": 4, "spark": 4}, "apps": apps}


def decided_exactly_once(got: list[dict[str, Any]], topic: str, produced: list[tuple[int, int]], expected: int,
                         context: str) -> None:
    """One decision per input record, by cause, and seq 1..n without gaps per pool."""
    violations = decision_violations(got, topic, produced, expected)
    assert not violations, f"{violations[:5]}; {context}"


def random_metrics(prefix: str, rng: random.Random, count: int, pools: int = POOLS
                   ) -> list[tuple[str, bytes | None, bytes | None]]:
    """`count` metric envelopes for random apps of the first `pools` pools (`pool_policy`), as produced records."""
    return [(prefix + "plugin_decider", f"pool-{rng.randrange(pools):02d}".encode(),
             envelope(rng.choice(["ats", "hadoop", "redis", "spark"]), rng.randrange(101), "plugin_decider"))
            for _ in range(count)]


def verified_exactly_once(kafka: str, prefix: str, produced: list[tuple[int, int]], expected: int,
                          worker_env: dict[str, str], context: Callable[[], str]) -> None:
    """The committed decisions: one per input (`decided_exactly_once`), and `replay --from-kafka --verify` agrees
    with every output. `context()` says what happened, for a failure."""
    got = [json.loads(r.value) for r in asyncio.run(
        read_committed(kafka, prefix + "scaling-decisions", expected, timeout=300))]
    decided_exactly_once(got, prefix + "plugin_decider", produced, expected, context())
    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert agreed(verified.stdout, expected) >= expected, context()


def wrong_partition(key: bytes | None) -> int:
    """A partition other than the key's: every record must be forwarded before it is folded."""
    assert key is not None
    return (partition_for(key.decode(), PARTITIONS) + 1 + key[-1] % (PARTITIONS - 1)) % PARTITIONS


def test_sigkill_loses_and_duplicates_no_decision(kafka: str, unique: str, worker: Worker, worker_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    asyncio.run(produce_all(kafka, [(p + "policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode())
                                    for i in range(POOLS)]))
    assert len(asyncio.run(read_committed(kafka, p + "scaling-decisions", POOLS, timeout=120))) == POOLS, \
        worker.log()[-3000:]

    metrics = random_metrics(p, rng, RECORDS)
    produced, kills = produce_while_killing(kafka, metrics, 1000, worker, rng, KILLS, longest=3.0)

    expected = POOLS + RECORDS
    got = [json.loads(r.value) for r in asyncio.run(
        read_committed(kafka, p + "scaling-decisions", expected, timeout=300))]
    context = f"seed {seed}, {kills} kills; worker log tail:\n{worker.log()[-3000:]}"
    assert len(produced) == RECORDS

    decided_exactly_once(got, p + "plugin_decider", produced, expected, context)

    # The decisions equal those of `tribunal audit replay` over the same input, exported from the topics.
    log = tmp_path / "export.jsonl"
    with log.open("w") as out:
        for topic, count in ((p + "policies", POOLS), (p + "plugin_decider", RECORDS)):
            for r in asyncio.run(read_committed(kafka, topic, count)):
                row = export_row(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)
                out.write(json.dumps(row) + "\n")
    replayed = tmp_path / "replayed.jsonl"
    tribunal("audit", "replay", "--input", str(log), "--output", str(replayed), "--topic-prefix", p)
    derived = [row["value"] for row in map(json.loads, replayed.read_text().splitlines())
               if row["topic"] == p + "scaling-decisions"]  # the decisions (beside them: pool-instances)
    key = lambda d: (d["pool"], d["seq"])  # noqa: E731
    assert sorted(derived, key=key) == sorted(got, key=key), context

    # And the audit's own check, straight from the topics: every recorded output re-derived.
    verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env)
    assert agreed(verified.stdout, expected) >= expected, context

    # What-if over this log: the policy in force differs nowhere; a changed one exactly where a replay of the
    # export with that pool's policy record edited does.
    pool = "pool-03"
    for name, document in (("same", pool_policy(3)), ("changed", {**pool_policy(3), "capacity": 20})):
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    same = json.loads(tribunal("audit", "what-if", "--pool", pool, "--policy", str(tmp_path / "same.json"), "--json",
                               env=worker_env).stdout)
    assert same["differ"] == 0 and same["inputs"] == sum(d["pool"] == pool for d in got), context
    changed = json.loads(tribunal("audit", "what-if", "--pool", pool, "--policy", str(tmp_path / "changed.json"),
                                  "--json",
                                  env=worker_env).stdout)
    edited = tmp_path / "edited.jsonl"
    with edited.open("w") as out:
        for r in records_of(log.read_text().splitlines()):
            if r.topic == p + "policies" and r.key == pool.encode():
                r = r._replace(value=json.dumps({**pool_policy(3), "capacity": 20}).encode())
            out.write(json.dumps(export_row(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)) + "\n")
    tribunal("audit", "replay", "--input", str(edited), "--output", str(tmp_path / "edited-out.jsonl"),
             "--topic-prefix", p)
    theirs = {(d["cause"]["topic"], d["cause"]["offset"]): d for d in (
        json.loads(line)["value"] for line in (tmp_path / "edited-out.jsonl").read_text().splitlines())
        if d["pool"] == pool}
    differ = sorted(k for k, d in theirs.items() if substance(d) != substance(
        next(g for g in got if (g["cause"]["topic"], g["cause"]["offset"]) == k)))
    assert sorted((d["input"].rsplit("[", 1)[0], int(d["input"].rsplit("@", 1)[1]))
                  for d in changed["differences"]) == differ and differ, context


def test_sigkill_while_records_are_forwarded_loses_and_duplicates_nothing(kafka: str, unique: str, worker: Worker,
                                                                          worker_env: dict[str, str]) -> None:
    """Every metric on a wrong partition: forwarded in one transaction with its offset, folded from the
    repartition topic in another; SIGKILLs may fall between the two."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    records = 6_000
    asyncio.run(produce_all(kafka, [(p + "policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode())
                                    for i in range(POOLS)]))
    metrics = random_metrics(p, rng, records)
    produced, kills = produce_while_killing(kafka, metrics, 400, worker, rng, 3, longest=4.0,
                                            partitioner=wrong_partition)  # ~15 s
    assert all(part == wrong_partition(key) for (part, _), (_, key, _) in zip(produced, metrics, strict=True))
    verified_exactly_once(kafka, p, produced, POOLS + records, worker_env,
                          lambda: f"seed {seed}, {kills} kills; worker log tail:\n{worker.log()[-3000:]}")
