"""End-to-end throughput and latency of the worker (exactly-once on), next to a bare aiokafka loop.

Both run in this one process's view of one broker (a fresh local stack, free ports):
  baseline  a bare aiokafka loop: consume a record, produce one record (no state, no transactions);
  tribunal  `tribunal worker` as a separate process: decider fold, tables, transactional outputs.
Throughput: a backlog of --records metric envelopes over 20 pools, timed from the first record
produced to the last output visible to a read_committed consumer. Latency: --rate records/s for
--seconds; for each output, visible-at minus the input's producer timestamp; p50 / p99.
Misrouted: the same backlog with every record produced to a partition other than its key's, so
each is forwarded through the repartition topic before it is folded (the cost of the extra hop).
Run: `.venv/bin/python bench/e2e.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from machine import describe  # type: ignore[import-not-found]

from streams.agents.routing import partition_for
from streams.infra import Cluster, Topology
from streams.infra.cluster import free_ports
from streams.io import envelope

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
POOLS = 20
SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -5},
        {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 5},
        {"Metrical": [80, 100], "Number": 10}]
POLICY = {"kind": "decider", "version": "bench", "capacity": 24, "initial": {"ats": 5, "hadoop": 5, "redis": 4},
          "apps": [{"App": a, "Priority": p, "MinNum": 1, "Spec": SPEC} for a, p in (("ats", 1), ("hadoop", 2),
                                                                                   ("redis", 3))]}


def metrics(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    return [(f"pool-{rng.randrange(POOLS):02d}".encode(),
             envelope(rng.choice(["ats", "hadoop", "redis"]), rng.randrange(101), "plugin_decider")) for _ in range(n)]


def misrouted(key: bytes) -> int:
    """A partition other than the key's (of 4)."""
    return (partition_for(key.decode(), 4) + 1) % 4


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], rate: float | None = None,
                  wrong: bool = False) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    await producer.start()
    try:
        start = time.monotonic()
        pending = []
        for i, (key, value) in enumerate(records):
            pending.append(await producer.send(topic, value, key=key, partition=misrouted(key) if wrong else None))
            if rate:
                ahead = start + i / rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def collect(bootstrap: str, topic: str, expected: int, timeout: float) -> list[tuple[float, bytes]]:
    """(visible-at wall time, value) of each record, read_committed, until `expected` arrived."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                isolation_level="read_committed")
    await consumer.start()
    out: list[tuple[float, bytes]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            now = time.time()
            for records in batch.values():
                out += [(now, r.value) for r in records]
    finally:
        await consumer.stop()
    return out


async def baseline_loop(bootstrap: str, source: str, sink: str, stop: asyncio.Event) -> None:
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id="bench-baseline",
                                auto_offset_reset="earliest")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    await consumer.start()
    await producer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            for records in batch.values():
                for r in records:
                    cause = {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp}
                    await producer.send(sink, json.dumps({"cause": cause}).encode(), key=r.key)
    finally:
        await producer.stop()
        await consumer.stop()


def latencies(seen: list[tuple[float, bytes]]) -> tuple[float, float]:
    ms = sorted((at - json.loads(value)["cause"]["timestamp"] / 1000) * 1000 for at, value in seen)
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


async def create(bootstrap: str, names: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, 4, 1) for n in names])
    finally:
        await admin.close()


async def run_baseline(bootstrap: str, records: int, rate: float, seconds: float) -> tuple[float, float, float]:
    await create(bootstrap, ["base-in", "base-out", "lat-in", "lat-out"])
    stop = asyncio.Event()
    loop = asyncio.create_task(baseline_loop(bootstrap, "base-in", "base-out", stop))
    started = time.monotonic()
    await produce(bootstrap, "base-in", metrics(records, 1))
    await collect(bootstrap, "base-out", records, 300)
    throughput = records / (time.monotonic() - started)
    stop.set()
    await loop
    stop = asyncio.Event()
    loop = asyncio.create_task(baseline_loop(bootstrap, "lat-in", "lat-out", stop))
    n = int(rate * seconds)
    _, seen = await asyncio.gather(produce(bootstrap, "lat-in", metrics(n, 2), rate),
                                   collect(bootstrap, "lat-out", n, 300))
    stop.set()
    await loop
    return (throughput, *latencies(seen))


async def run_tribunal(bootstrap: str, records: int, rate: float, seconds: float,
                       home: Path) -> tuple[float, float, float, float]:
    [port] = free_ports(1)
    results = []
    for phase, (n, r, wrong) in enumerate(((records, None, False), (int(rate * seconds), rate, False),
                                           (records, None, True))):
        prefix = f"bench{phase}."
        env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": prefix,
               "TRIBUNAL_APP_ID": f"bench{phase}", "TRIBUNAL_DATA_DIR": str(home / f"w{phase}"),
               "TRIBUNAL_WEB_PORT": str(port), "TRIBUNAL_LOG_LEVEL": "warning"}
        subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)
        worker = subprocess.Popen([TRIBUNAL, "worker"], env=env, stdout=(home / f"w{phase}.log").open("wb"),
                                  stderr=subprocess.STDOUT)
        try:
            await produce(bootstrap, prefix + "policies",
                          [(f"pool-{i:02d}".encode(), json.dumps(POLICY).encode()) for i in range(POOLS)])
            await collect(bootstrap, prefix + "scaling-decisions", POOLS, 120)
            started = time.monotonic()
            _, seen = await asyncio.gather(produce(bootstrap, prefix + "plugin_decider", metrics(n, phase + 1), r,
                                                   wrong),
                                           collect(bootstrap, prefix + "scaling-decisions", n + POOLS, 600))
            seen = [s for s in seen if json.loads(s[1])["cause"]["topic"].endswith("plugin_decider")]
            results.append((n / (time.monotonic() - started), seen))
        finally:
            worker.terminate()
            worker.wait(60)
    return (results[0][0], *latencies(results[1][1]), results[2][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tribunal-e2e-") as tmp:
        zk, kafka, controller = free_ports(3)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=kafka, controller_port=controller, zk_port=zk))
        cluster.up()
        try:
            bootstrap = cluster.topology.bootstrap
            base = asyncio.run(run_baseline(bootstrap, args.records, args.rate, args.seconds))
            ours = asyncio.run(run_tribunal(bootstrap, args.records, args.rate, args.seconds, Path(tmp)))
        finally:
            cluster.down()
    print(f"{describe()}; "
          f"{args.records} records backlog; latency at {args.rate:g}/s for {args.seconds:g}s")
    print(f"{'':<22} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'aiokafka loop':<22} {base[0]:>10,.0f} {base[1]:>8.1f} {base[2]:>8.1f}")
    print(f"{'tribunal worker (EOS)':<22} {ours[0]:>10,.0f} {ours[1]:>8.1f} {ours[2]:>8.1f}")
    print(f"{'tribunal, misrouted':<22} {ours[3]:>10,.0f} {'':>8} {'':>8}  (every record forwarded to its key's "
          "partition first)")
    print(f"throughput ratio tribunal/baseline: {ours[0] / base[0]:.2f}; misrouted/baseline: {ours[3] / base[0]:.2f}; "
          f"misrouted/keyed: {ours[3] / ours[0]:.2f}")


if __name__ == "__main__":
    main()
