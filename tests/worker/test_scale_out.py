"""Three workers in one group over 12 partitions and 200 pools; SIGKILL one at a time while traffic flows.

Each kill is restarted at once: static membership gives the worker its partitions back without a
rebalance (the joins at start do move partitions between the workers, under traffic). Afterwards
a read_committed consumer must see exactly one decision per input, `seq` gapless per pool, what
`replay --from-kafka --verify` derives, no worker restarting itself; and `tribunal pools state` must
answer the same for any pool from any worker (it forwards the request to the key's owner).

Every other kill outlasts the group's session, so the killed worker's partitions move to the two
survivors and come back when it returns; the others are the quick restarts above. (The run of quick
restarts alone was a variant of its own; it is a subset of this one, and two minutes of CI.) A partition
that came back to a worker which held it before used to come back without its table state (its pools'
policies), and records were dead-lettered as `no_policy` or `state_unreadable` instead of decided:
Faust's recovery ended a changelog partition at its highwater once the consumer had fetched that far,
though the records fetched had been dropped in the rebalance
(`faust_private.end_recovery_only_when_read`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from streams.clients import envelope
from streams.infra.topology import free_ports
from tests.helpers import Worker, agreed, produce_all, read_committed, tribunal, wait_until_ready
from tests.worker.test_crash import decided_exactly_once, pool_policy

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

WORKERS, PARTITIONS, POOLS, RECORDS, RATE = 3, 12, 200, 12_000, 400
SESSION = 6.0  # seconds until the group gives a dead worker's partitions to the others


def assignment(web: str) -> dict[int, str] | None:
    """Which worker (by web address) holds each partition of the pool-state table, as `web` sees it."""
    try:
        with urllib.request.urlopen(f"http://{web}/router/", timeout=2) as response:
            hosts = json.loads(response.read())
    except OSError:
        return None
    owners: dict[int, str] = {}
    for url, topics in hosts.items():
        for topic, partitions in topics.items():
            if topic.endswith("pool-state-changelog"):
                owners.update((p, url.split("//")[-1].rstrip("/")) for p in partitions)
    return owners or None


def watch_assignments(workers: list[Worker], webs: list[str], stop: threading.Event) -> list[dict[int, str]]:
    """Poll the live workers' routing tables until `stop`: each distinct complete assignment seen, in order."""
    seen: list[dict[int, str]] = []

    def poll() -> None:
        while not stop.is_set():
            for w, web in zip(workers, webs, strict=True):
                owners = assignment(web) if w.alive else None
                if owners and len(owners) == PARTITIONS and (not seen or seen[-1] != owners):
                    seen.append(owners)
            stop.wait(0.5)

    threading.Thread(target=poll, daemon=True).start()
    return seen


def moved_and_back(seen: list[dict[int, str]]) -> list[int]:
    """Partitions that some worker held, lost to another, and held again."""
    back = set()
    for p in range(PARTITIONS):
        owners = [s[p] for s in seen]
        for i, a in enumerate(owners):
            later = owners[i + 1:]
            if any(b != a for b in later) and a in later[[b != a for b in later].index(True):]:
                back.add(p)
    return sorted(back)


def test_three_workers_lose_nothing_while_killed_in_turn(kafka: str, unique: str, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    p = f"{unique}."
    webs = [f"127.0.0.1:{port}" for port in free_ports(WORKERS)]
    base = {**os.environ, "KAFKA_BOOTSTRAP": kafka, "TRIBUNAL_TOPIC_PREFIX": p, "TRIBUNAL_APP_ID": unique,
            "TRIBUNAL_PARTITIONS": str(PARTITIONS), "TRIBUNAL_SESSION_TIMEOUT": str(SESSION)}
    envs = [{**base, "TRIBUNAL_DATA_DIR": str(tmp_path / f"worker{i}"), "TRIBUNAL_WEB_PORT": web.split(":")[1]}
            for i, web in enumerate(webs)]
    tribunal("topics", "create", env=base)
    workers = [Worker(env, tmp_path / f"worker{i}.log") for i, env in enumerate(envs)]
    stop = threading.Event()
    try:
        for w in workers:
            w.start()
        asyncio.run(produce_all(kafka, [(p + "policies", f"pool-{i:03d}".encode(), json.dumps(pool_policy(i)).encode())
                                        for i in range(POOLS)]))
        assert len(asyncio.run(read_committed(kafka, p + "scaling-decisions", POOLS, timeout=180))) == POOLS, \
            "\n".join(w.log()[-2000:] for w in workers)
        seen = watch_assignments(workers, webs, stop)

        metrics = [(p + "plugin_decider", f"pool-{rng.randrange(POOLS):03d}".encode(),
                    envelope(rng.choice(["ats", "hadoop", "redis", "spark"]), rng.randrange(101), "plugin_decider"))
                   for _ in range(RECORDS)]
        produced: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: produced.extend(asyncio.run(
            produce_all(kafka, metrics, RATE))))
        producer.start()
        kills: list[tuple[int, bool]] = []
        while producer.is_alive() or len(kills) < 4:
            i = rng.randrange(WORKERS)
            for w in workers:
                wait_until_ready(w, w.starts)
            time.sleep(rng.uniform(1.0, 3.0))
            long = len(kills) % 2 == 1  # every other kill outlasts the session: its partitions move
            workers[i].kill()
            if long:
                time.sleep(SESSION + 6)
            workers[i].start()
            kills.append((i, long))
        producer.join()
        for w in workers:
            wait_until_ready(w, w.starts)
        time.sleep(3)  # the last rejoin's assignment, for the watcher
        stop.set()

        expected = POOLS + RECORDS
        got = [json.loads(r.value) for r in asyncio.run(
            read_committed(kafka, p + "scaling-decisions", expected, timeout=300))]
        logs = "\n".join(f"--- worker {i}\n{w.log()[-2500:]}" for i, w in enumerate(workers))
        context = f"seed {seed}, kills {kills}; {len(seen)} assignments; logs:\n{logs}"
        assert len(produced) == RECORDS
        decided_exactly_once(got, p + "plugin_decider", produced, expected, context)

        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=base)
        assert agreed(verified.stdout, expected) > expected, context

        # Each rebalance was settled (everything folded committed before it): no worker restarted itself.
        assert not [w for w in workers if "writing a batch failed" in w.log()], context

        assert moved_and_back(seen), f"partitions went to the survivors and came back: {seen}; {context}"

        # Any worker answers for any pool: the owner's state, the same from all three.
        last: dict[str, dict[str, Any]] = {}
        for d in got:
            if d["seq"] > last.get(d["pool"], {"seq": 0})["seq"]:
                last[d["pool"]] = d
        for pool in rng.sample(sorted(last), 12):
            procs = [tribunal("pools", "state", "--pool", pool, "--json", "--web", web, check=False) for web in webs]
            assert all(p.returncode == 0 for p in procs), (pool, webs, [p.stderr for p in procs])
            answers = [json.loads(p.stdout) for p in procs]
            assert answers[0] == answers[1] == answers[2], pool
            instances = {a["app"]: a["instances"] for a in answers[0]["decider"]["apps"]}
            assert instances == last[pool]["instances"], (pool, answers[0], last[pool])
    finally:
        stop.set()
        for w in workers:
            w.stop()
