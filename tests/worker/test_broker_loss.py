"""One worker on three brokers: SIGKILL the broker that leads the busiest partitions mid-stream, then
start it again. Every topic (inputs, outputs, changelogs, Kafka's own) has 3 replicas and takes a
write once 2 hold it (`min.insync.replicas`), so the loss of one broker must cost nothing: the
worker goes on deciding, and afterwards a read_committed consumer sees exactly one decision per
input, `seq` gapless per pool, what `replay --from-kafka --verify` derives. The longest time
without a decision while the broker was down is printed (run with `-s`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaClient
from aiokafka.structs import TopicPartition

from streams.clients import envelope
from streams.infra import Cluster, Topology
from streams.infra.topology import free_port_block, free_ports
from tests.helpers import Worker, agreed, produce_all, read_committed, tribunal, wait_until_ready
from tests.worker.test_crash import decided_exactly_once, pool_policy

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

BROKERS, PARTITIONS, POOLS, RECORDS, RATE = 3, 6, 60, 6_000, 200
DOWN = 15.0  # seconds the broker stays dead


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A stack of its own with three brokers (each also a KRaft controller: a quorum of three)."""
    block = free_port_block(2 * BROKERS)
    stack = Cluster(Topology(home=tmp_path_factory.mktemp("three"), brokers=BROKERS, kafka_port=block,
                             controller_port=block + BROKERS, zk_port=free_ports(1)[0], broker_heap_mb=320))
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


async def _cluster_metadata(bootstrap: str) -> Any:
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        return await client.fetch_all_metadata()
    finally:
        await client.close()


def layout(bootstrap: str, topics: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """For each topic, each partition's (leader node id, replica count)."""
    metadata = asyncio.run(_cluster_metadata(bootstrap))
    return {topic: {p: (metadata.leader_for_partition(TopicPartition(topic, p)) or -1,
                        len(metadata._partitions[topic][p].replicas))
                    for p in metadata.partitions_for_topic(topic) or ()} for topic in topics}


def all_topics(bootstrap: str, prefix: str, app_id: str) -> list[str]:
    """Tribunal's topics, the worker's changelogs and Kafka's own (offsets, transactions), as the broker lists them."""
    metadata = asyncio.run(_cluster_metadata(bootstrap))
    return sorted(t for t in metadata.topics() if t.startswith((prefix, app_id, "__")))


def longest_silence(decisions: list[object], after: float) -> float:
    """The longest gap in seconds between two decisions written after `after` (a UNIX time)."""
    times = sorted(r.timestamp / 1000 for r in decisions if r.timestamp / 1000 >= after)  # type: ignore[attr-defined]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def test_losing_the_busiest_broker_loses_and_duplicates_nothing(cluster: Cluster, unique: str,
                                                                tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    bootstrap = cluster.topology.bootstrap
    p = f"{unique}."
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "ZOOKEEPER_HOSTS": cluster.topology.zookeeper_hosts,
           "TRIBUNAL_TOPIC_PREFIX": p, "TRIBUNAL_APP_ID": unique, "TRIBUNAL_PARTITIONS": str(PARTITIONS),
           "TRIBUNAL_REPLICATION_FACTOR": "3", "TRIBUNAL_DATA_DIR": str(tmp_path / "data"),
           "TRIBUNAL_WEB_PORT": str(free_ports(1)[0])}
    tribunal("topics", "create", env=env)
    worker = Worker(env, tmp_path / "worker.log")
    victim = None
    try:
        worker.start()
        asyncio.run(produce_all(bootstrap, [(p + "policies", f"pool-{i:02d}".encode(),
                                             json.dumps(pool_policy(i)).encode()) for i in range(POOLS)]))
        assert len(asyncio.run(read_committed(bootstrap, p + "scaling-decisions", POOLS, timeout=180))) == POOLS, \
            worker.log()[-3000:]

        topics = all_topics(bootstrap, p, unique)
        assert any(t.endswith("-changelog") for t in topics), topics
        thin = {t: sorted({r for _, r in parts.values()}) for t, parts in layout(bootstrap, topics).items()
                if any(r != BROKERS for _, r in parts.values())}
        assert not thin, f"topics with fewer than {BROKERS} replicas: {thin}"

        metrics = [(p + "plugin_decider", f"pool-{rng.randrange(POOLS):02d}".encode(),
                    envelope(rng.choice(["ats", "hadoop", "redis", "spark"]), rng.randrange(101), "plugin_decider"))
                   for _ in range(RECORDS)]
        produced: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: produced.extend(asyncio.run(produce_all(bootstrap, metrics, RATE))))
        producer.start()
        time.sleep(RECORDS / RATE / 4)
        busiest = layout(bootstrap, [p + "plugin_decider", p + "scaling-decisions"])
        leads = Counter(leader for parts in busiest.values() for leader, _ in parts.values())
        node = leads.most_common(1)[0][0]
        victim = next(s for s in cluster.servers() if s.name == f"kafka-{node}")
        killed_at = time.time()
        cluster.kill(victim)
        time.sleep(DOWN)
        cluster.start(victim)
        victim = None
        producer.join()
        wait_until_ready(worker, worker.starts)

        expected = POOLS + RECORDS
        records = asyncio.run(read_committed(bootstrap, p + "scaling-decisions", expected, timeout=300))
        got = [json.loads(r.value) for r in records]
        context = f"seed {seed}, killed broker {node} (led {leads}); log:\n{worker.log()[-4000:]}"
        assert len(produced) == RECORDS
        decided_exactly_once(got, p + "plugin_decider", produced, expected, context)
        assert worker.alive, context
        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=env)
        assert agreed(verified.stdout, expected) >= expected, context
        silence = longest_silence(records, killed_at)
        print(f"\nbroker {node} down {DOWN:.0f} s at {RATE}/s: longest time without a decision {silence:.1f} s")
    finally:
        if victim is not None:
            cluster.start(victim)
        worker.stop()

