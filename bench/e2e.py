"""End-to-end throughput and latency of the worker (exactly-once on), next to a bare aiokafka loop.

Both run in this one process's view of one broker (a fresh local stack, free ports):
  baseline  a bare aiokafka loop: consume a record, produce one record (no state, no transactions);
            for latency also transactional: a fetch's records and offsets in one transaction (the
            worker's peer under exactly-once: what Kafka's transactions cost on this broker);
  Faust     a Faust agent that only counts events (bench/bare_faust.py): Faust's own ceiling; and the
            same agent taking its events as the worker's agents do: the ceiling of tribunal's path;
  tribunal  `tribunal worker` as a separate process: decider fold, tables, transactional outputs.
Throughput: a backlog of --records metric envelopes over 20 pools, timed from the first record
produced to the last output visible to a read_committed consumer. Latency: --rate records/s for
--seconds, after --warm seconds at the rate not measured; for each output, visible-at minus the input's producer
timestamp; p50 / p99 (and p99 without the first second's inputs).
The same latency at-least-once, and at --high-rate for --high-seconds (does the worker keep up:
how many decisions were still outstanding when the last input was produced). Misrouted: the
backlog with every record produced to a partition other than its key's, so each is forwarded
through the repartition topic before it is folded (the cost of the extra hop).
Last, per phase, where a record's time went in the worker (its `/checkpoint/` page and CPU time).
`--ceiling N`: only the backlogs, N rounds of the transactional loops (one producer; one per partition), both
counting agents, the worker (exactly-once, then at-least-once) and the transactional loop writing the worker's
outputs instead of a small record (folded beforehand; then folded in the loop), each round on new topics, per round
each one's ratio to the transactional loop and the processor time a record of the draining process, the broker and
this bench.
`--latency N`: only the exactly-once latency at --rate for --seconds, N rounds of the transactional loop (one
producer; one per partition) and the worker, alternating which goes first, the ratio of their p99 per round and its
median. Each side's topics are new each round (and each phase's in the full run), and each side first runs --warm
seconds at the rate, not measured (`--warm 0`: none): the broker's first writes to newly made partitions stall for
up to a few hundred ms on this machine's ext4 (not on tmpfs: issue 59's fourth session), and the worker writes to
several times as many partitions as the loop (outputs and changelogs), so a cold round measures the file system more
than either.
Run: `.venv/bin/python bench/e2e.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from machine import describe, local_stack, ratio  # type: ignore[import-not-found]

from streams.clients import envelope
from streams.infra.topology import free_ports
from streams.kafka import partition_for

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
POOLS = 20
PARTITIONS = 4  # of every topic here: the bench's own and tribunal's default
# In a fresh worker's first second of traffic (each phase starts one, on new topics) a flush waits
# 30-100 ms on the broker instead of about 10 (docs/performance-history.md): the p99 is printed with and
# without that second.
WARM_UP = 1.0
SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -5},
        {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 5},
        {"Metrical": [80, 100], "Number": 10}]
POLICY = {"kind": "decider", "version": "bench", "capacity": 24, "initial": {"ats": 5, "hadoop": 5, "redis": 4},
          "apps": [{"App": a, "Priority": p, "MinNum": 1, "Spec": SPEC}
                   for a, p in (("ats", 1), ("hadoop", 2), ("redis", 3))]}


SECURITY: dict[str, Any] = {}  # how the bench's own clients connect (bench/secure.py: as the stack's admin)


def policies() -> list[tuple[bytes, bytes]]:
    """Each pool's `POLICY` record: (key, value), as a bench produces them before its backlog."""
    return [(f"pool-{i:02d}".encode(), json.dumps(POLICY).encode()) for i in range(POOLS)]


def metrics(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    return [(f"pool-{rng.randrange(POOLS):02d}".encode(),
             envelope(rng.choice(["ats", "hadoop", "redis"]), rng.randrange(101), "plugin_decider")) for _ in range(n)]


def misrouted(key: bytes) -> int:
    """A partition other than the key's (of 4)."""
    return (partition_for(key.decode(), 4) + 1) % 4


async def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes]], rate: float | None = None,
                  wrong: bool = False) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, **SECURITY)
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


async def reader(bootstrap: str, topic: str, at_end: bool = False) -> AIOKafkaConsumer:
    """A read_committed consumer holding every partition of `topic` at its first offset (`at_end`: its end).

    Positioned before the inputs are produced: a consumer still starting when they were made their
    latency its own start-up (100-300 ms).
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                isolation_level="read_committed", **SECURITY)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await (consumer.seek_to_end(*tps) if at_end else consumer.seek_to_beginning(*tps))
        for tp in tps:
            await consumer.position(tp)
        if consumer.partitions_for_topic(topic) != set(range(PARTITIONS)):
            raise RuntimeError(f"{topic} does not have {PARTITIONS} partitions")
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def drain(consumer: AIOKafkaConsumer, expected: int, timeout: float,
                out: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """(visible-at wall time, value) of each record, until `expected` arrived (into `out`); stops `consumer`."""
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


async def collect(bootstrap: str, topic: str, expected: int, timeout: float) -> list[tuple[float, bytes]]:
    return await drain(await reader(bootstrap, topic), expected, timeout, [])


async def collecting(bootstrap: str, topic: str, expected: int, timeout: float,
                     out: list[tuple[float, bytes]], at_end: bool = False) -> asyncio.Task[list[tuple[float, bytes]]]:
    """`collect` into `out` in the background, started once its reader is positioned (`at_end`: what comes after
    what `topic` holds now)."""
    return asyncio.create_task(drain(await reader(bootstrap, topic, at_end), expected, timeout, out))


async def warm_up(bootstrap: str, source: str, sink: str, records: int, rate: float, before: int = 0) -> None:
    """`records` metric envelopes through whatever reads `source` at `rate`, until their outputs are in `sink` (which
    held `before` already): every partition written once before anything is measured."""
    if records:
        task = await collecting(bootstrap, sink, before + records, 300, [])
        await produce(bootstrap, source, metrics(records, 99), rate)
        if len(await task) < before + records:  # late warm-up outputs would be measured
            raise RuntimeError(f"the warm-up's {records} outputs did not all reach {sink} in 300 s")


Emitter = Callable[[Any], list[tuple[str, bytes]]]  # a consumed record -> what the loop writes for it: (topic, value)


def worker_outputs(sink: str, folding: bool, records: int = 0) -> Emitter:
    """What the worker writes for each metric envelope of a pool under `POLICY`: its `ScalingDecision` to `sink` and
    its `PoolInstances`, when the decision changed them, to `sink`-state, the same bytes the compiled fold makes (the
    worker's tables' changelogs left out: a loop writing these writes less than the worker). `folding`: the fold runs
    in the loop, for each record consumed (an aiokafka worker); otherwise the outputs of `metrics(records, 1)`, the
    backlog `backlog_through` produces, are folded here beforehand and the loop only writes them (the broker's and
    the producer's share of the worker's outputs, without the fold's)."""
    from streams.core import pools
    from streams.core.source import SourceRecord

    topics = {pools.SCALING_DECISIONS: sink, pools.POOL_INSTANCES: f"{sink}-state"}
    states = {key: pools.apply(pools.PoolState(), SourceRecord(pools.POLICIES, 0, offset, 0, key, value),
                               pools.POLICIES)[0] for offset, (key, value) in enumerate(policies())}

    def fold(key: bytes, value: bytes, partition: int, offset: int, timestamp: int) -> list[tuple[str, bytes]]:
        after, outputs = pools.apply(states[key], SourceRecord(pools.PLUGIN_DECIDER, partition, offset, timestamp,
                                                               key, value), pools.PLUGIN_DECIDER)
        states[key] = after
        return [(topics[o.stream], o.value_bytes()) for o in outputs if o.stream in topics]

    if folding:
        return lambda r: fold(r.key, r.value, r.partition, r.offset, r.timestamp)
    ahead: dict[bytes, collections.deque[list[tuple[str, bytes]]]] = {}
    for offset, (key, value) in enumerate(metrics(records, 1)):  # the cause's fields differ, the sizes hardly
        ahead.setdefault(key, collections.deque()).append(fold(key, value, partition_for(key.decode(), PARTITIONS),
                                                               offset, 1_732_200_000_000 + offset))
    return lambda r: ahead[r.key].popleft()


async def baseline_loop(bootstrap: str, source: str, sink: str, stop: asyncio.Event,
                        transactional: bool = False, per_partition: bool = False, emit: Emitter | None = None
                        ) -> None:
    """Consume a record, produce one; `transactional`: each fetched batch's records and offsets in one
    transaction, its writes acknowledged before the offsets join it (exactly-once's own cost, the
    worker's peer for latency), read_committed. `per_partition`: a transactional producer for each input
    partition, each committing its own partition's writes and offset, all at once: the only exactly-once that
    fences a rebalanced member's zombie on aiokafka, whose `send_offsets_to_transaction` carries the group id
    alone (TxnOffsetCommit v0, no KIP-447 group metadata), and so the worker's way (Faust's). `emit`: what it writes
    for a record instead of one naming its cause (`worker_outputs`)."""
    group = f"bench-{sink}"
    transactional = transactional or per_partition
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=not transactional,
                                isolation_level="read_committed" if transactional else "read_uncommitted")
    producers: dict[int | None, AIOKafkaProducer] = {}

    async def producer_for(slot: int | None) -> AIOKafkaProducer:
        """The producer of `slot`: an input partition, or None for every partition."""
        if slot not in producers:
            name = f"bench-{sink}" + ("" if slot is None else f"-{slot}")
            producers[slot] = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1,
                                               transactional_id=name if transactional else None)
            await producers[slot].start()
        return producers[slot]

    async def commit(producer: AIOKafkaProducer, batch: dict[TopicPartition, list[Any]]) -> None:
        await producer.send_offsets_to_transaction({tp: records[-1].offset + 1 for tp, records in batch.items()},
                                                   group)
        await producer.commit_transaction()

    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            if not batch:
                continue
            # what each producer writes: one producer for every partition, or one for each
            parts: dict[int | None, dict[TopicPartition, list[Any]]] = {}
            for tp, records in batch.items():
                parts.setdefault(tp.partition if per_partition else None, {})[tp] = records
            sent, written = [], []
            for slot, part in parts.items():
                producer = await producer_for(slot)
                written.append((producer, part))
                if transactional:
                    await producer.begin_transaction()
                for records in part.values():
                    for r in records:
                        if emit is not None:
                            for topic, value in emit(r):
                                sent.append(await producer.send(topic, value, key=r.key))
                            continue
                        cause = {"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                 "timestamp": r.timestamp}
                        sent.append(await producer.send(sink, json.dumps({"cause": cause}).encode(), key=r.key))
            if transactional:
                await asyncio.gather(*sent)
                await asyncio.gather(*(commit(producer, part) for producer, part in written))
    finally:
        for producer in producers.values():
            await producer.stop()
        await consumer.stop()


class Latency(NamedTuple):
    p50: float
    p99: float
    warm: float  # p99 without the first WARM_UP seconds of inputs


def latency_of(seen: list[tuple[float, bytes]]) -> Latency:
    """p50 and p99 in ms of each output's visible-at minus its input's timestamp, and the p99 without
    the inputs of the first WARM_UP seconds."""
    pairs = [(at, json.loads(value)["cause"]["timestamp"] / 1000) for at, value in seen]
    first = min(made for _, made in pairs)
    ms = sorted((at - made) * 1000 for at, made in pairs)
    warm = sorted((at - made) * 1000 for at, made in pairs if made >= first + WARM_UP)
    return Latency(statistics.median(ms), _p99(ms), _p99(warm))


def _p99(ms: list[float]) -> float:
    """The 99th percentile, nearest rank (of 10 samples: the largest; of 10,000: the 9,900th, as before)."""
    ordered = sorted(ms)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


async def create(bootstrap: str, names: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names])
    finally:
        await admin.close()


async def loop_latency(bootstrap: str, name: str, rate: float, seconds: float, transactional: bool,
                       per_partition: bool = False, warm: float = 0.0) -> Latency:
    """`baseline_loop` fed `rate` records/s for `seconds` on topics of its own (after `warm` seconds not measured)."""
    await create(bootstrap, [f"{name}-in", f"{name}-out"])
    stop = asyncio.Event()
    loop = asyncio.create_task(baseline_loop(bootstrap, f"{name}-in", f"{name}-out", stop, transactional,
                                             per_partition))
    await warm_up(bootstrap, f"{name}-in", f"{name}-out", int(rate * warm), rate)
    n = int(rate * seconds)
    seen: list[tuple[float, bytes]] = []
    task = await collecting(bootstrap, f"{name}-out", n, 300, seen, at_end=True)
    await produce(bootstrap, f"{name}-in", metrics(n, 2), rate)
    await task
    stop.set()
    await loop
    return latency_of(seen)


async def run_baseline(bootstrap: str, records: int, rate: float, seconds: float, warm: float
                       ) -> tuple[float, Latency, Latency, float, float]:
    """The bare loop's backlog throughput, its latency at `rate`, the transactional loop's latency, the
    transactional loop's backlog throughput (one producer: the issue's limit of exactly-once on aiokafka) and
    the same with a producer per partition (the exactly-once a group of workers can use on aiokafka)."""
    plain = await loop_backlog(bootstrap, "base", records, False)
    txn_backlog = await loop_backlog(bootstrap, "tbase", records, True)
    partition_backlog = await loop_backlog(bootstrap, "pbase", records, True, per_partition=True)
    return (plain, await loop_latency(bootstrap, "lat", rate, seconds, False, warm=warm),
            await loop_latency(bootstrap, "txn", rate, seconds, True, warm=warm), txn_backlog, partition_backlog)


async def loop_backlog(bootstrap: str, name: str, records: int, transactional: bool, per_partition: bool = False
                       ) -> float:
    """Records/s of the bare loop draining a backlog (`backlog_through`)."""
    await create(bootstrap, [f"{name}-in", f"{name}-out"])
    stop = asyncio.Event()
    loop = asyncio.create_task(baseline_loop(bootstrap, f"{name}-in", f"{name}-out", stop, transactional,
                                             per_partition))
    throughput = await backlog_through(bootstrap, name, records)
    stop.set()
    await loop
    return throughput


async def backlog_through(bootstrap: str, name: str, records: int) -> float:
    """Records/s of `records` metric envelopes produced to `name`-in and read back from `name`-out by whatever
    drains one into the other: timed from the first record produced to the last output read (read_committed),
    as the worker's backlog is."""
    started = time.monotonic()
    await produce(bootstrap, f"{name}-in", metrics(records, 1))
    await collect(bootstrap, f"{name}-out", records, 300)
    return records / (time.monotonic() - started)


def bare_faust(bootstrap: str, records: int, path: str = "faust", run: int = 0) -> tuple[float, float]:
    """Records/s of a Faust agent that only counts, draining a backlog of `records` (bench/bare_faust.py) on
    topics of its own (`run` numbers them), and its processor time a record (us); `path` "worker": taking its
    events as the worker's agents do."""
    topic = f"faust-in-{path}-{run}"
    asyncio.run(create(bootstrap, [topic]))
    asyncio.run(produce(bootstrap, topic, metrics(records, 3)))
    script = Path(__file__).with_name("bare_faust.py")
    with tempfile.TemporaryDirectory() as home:  # Faust's data directory (`<app id>-data/`) goes there, not in bench/
        proc = subprocess.run([sys.executable, str(script), "worker", "-l", "warn"], cwd=home, timeout=600,
                              env={**os.environ, "BARE_BOOTSTRAP": bootstrap, "BARE_TOPIC": topic,
                                   "BARE_COUNT": str(records), "BARE_PATH": path}, capture_output=True, text=True)
    said = {words[-2]: words[-1] for words in map(str.split, (proc.stdout + proc.stderr).splitlines())
            if len(words) >= 2 and words[-2] in ("rate", "cpu")}  # Faust's logging may prefix the line
    if "rate" not in said:
        raise RuntimeError(f"bare Faust agent printed no rate:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return float(said["rate"]), float(said.get("cpu", "nan"))


@dataclass
class Phase:
    name: str
    records: int
    rate: float | None = None  # None: a backlog, produced as fast as possible
    guarantee: str = "exactly_once"
    wrong: bool = False  # every record on a partition other than its key's
    metrics: bool = True  # the worker counts for /metrics (TRIBUNAL_METRICS)
    warm: float = 0.0  # seconds at `rate` first, not measured (`warm_up`)


@dataclass
class Result:
    phase: Phase
    throughput: float
    seen: list[tuple[float, bytes]]
    stats: dict[str, float]
    cpu: float  # the worker's CPU seconds while the phase ran
    behind: int  # decisions still missing when the last input was produced
    broker_cpu: float = math.nan  # the broker's CPU seconds while the phase ran (where `run_phase` was given it)
    bench_cpu: float = math.nan  # this process's CPU seconds while the phase ran (its producer and reader)


def worker_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_stats(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/checkpoint/", timeout=10) as page:
        return json.load(page)


def worker_env(bootstrap: str, name: str, home: Path, guarantee: str = "exactly_once") -> tuple[dict[str, str], int]:
    """The environment of a `tribunal worker` on its own topics (`name.` prefix, created here), app id and
    web port (returned), with its data in `home`."""
    [port] = free_ports(1)
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": f"{name}.",
           "TRIBUNAL_APP_ID": name, "TRIBUNAL_DATA_DIR": str(home / f"w-{name}"),
           "TRIBUNAL_WEB_PORT": str(port), "TRIBUNAL_LOG_LEVEL": "warning",
           "TRIBUNAL_PROCESSING_GUARANTEE": guarantee,
           "TRIBUNAL_RECORD_TIME": "producer"}  # latency counts from the producer's send, not the broker's append
    subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)
    return env, port


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`tribunal worker` in `env` (from `worker_env`), logging beside its data directory."""
    with Path(env["TRIBUNAL_DATA_DIR"] + ".log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen([TRIBUNAL, "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)


async def run_phase(bootstrap: str, phase: Phase, index: int, home: Path, broker: int | None = None) -> Result:
    prefix = f"bench{index}."
    env, port = worker_env(bootstrap, f"bench{index}", home, phase.guarantee)
    env["TRIBUNAL_METRICS"] = str(phase.metrics).lower()
    worker = start_worker(env)
    try:
        await produce(bootstrap, prefix + "policies", policies())
        await collect(bootstrap, prefix + "scaling-decisions", POOLS, 120)
        warm = int((phase.rate or 0) * phase.warm)
        await warm_up(bootstrap, prefix + "plugin_decider", prefix + "scaling-decisions", warm, phase.rate or 0, POOLS)
        seen: list[tuple[float, bytes]] = []
        expected = phase.records + (0 if warm else POOLS)
        task = await collecting(bootstrap, prefix + "scaling-decisions", expected, 900, seen, at_end=bool(warm))
        before, cpu = worker_stats(port), worker_cpu(worker.pid)
        broker_cpu = math.nan if broker is None else worker_cpu(broker)
        bench_cpu = time.process_time()
        started = time.monotonic()
        await produce(bootstrap, prefix + "plugin_decider", metrics(phase.records, index + 1), phase.rate,
                      phase.wrong)
        behind = expected - len(seen)
        await task
        elapsed = time.monotonic() - started
        after, cpu = worker_stats(port), worker_cpu(worker.pid) - cpu
        broker_cpu = math.nan if broker is None else worker_cpu(broker) - broker_cpu
        bench_cpu = time.process_time() - bench_cpu
        stats = {k: after[k] - before[k] for k in after if k != "largest"} | {"largest": after["largest"]}
        seen = [s for s in seen if json.loads(s[1])["cause"]["topic"].endswith("plugin_decider")]
        return Result(phase, phase.records / elapsed, seen, stats, cpu, behind, broker_cpu, bench_cpu)
    finally:
        worker.terminate()
        worker.wait(60)


def breakdown(r: Result) -> str:
    """Where a record's time went in the worker: microseconds per record."""
    s, n = r.stats, max(1, r.stats["records"])
    wall = r.phase.records / r.throughput
    us = {"agents waiting for Faust's next record": s["waiting"], "admit": s["admit"], "fold": s["fold"],
          "write": s["write"], "acknowledgements (waiting on the broker)": s["acks"],
          "commit (waiting on the broker)": s["commit"]}
    us["worker CPU outside fold and write (Faust, aiokafka)"] = max(0.0, r.cpu - s["fold"] - s["write"])
    parts = ", ".join(f"{k} {v / n * 1e6:.0f}" for k, v in us.items())
    flushes = max(1.0, s["batches"])
    return (f"{r.phase.name}: {n:.0f} records in {s['batches']:.0f} batches (largest {s['largest']:.0f}); "
            f"us/record: {parts}; worker CPU {r.cpu / n * 1e6:.0f} us/record ({r.cpu / wall:.0%} of a core); ms a "
            f"flush: write {s['write'] / flushes * 1e3:.1f}, acknowledgements {s['acks'] / flushes * 1e3:.1f}, "
            f"commit {s['commit'] / flushes * 1e3:.1f}")


def metrics_cost(records: int, pairs: int) -> None:
    """Backlog runs with metrics on and off, alternating which goes first (on-off, off-on, ...) so a drift of
    the shared machine falls on both alike; the ratio of each pair and their median."""
    phases = [Phase(f"backlog, metrics {'on' if on else 'off'}", records, metrics=on)
              for i in range(pairs) for on in ((True, False) if i % 2 == 0 else (False, True))]
    with local_stack("e2e-metrics") as cluster:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        runs = [asyncio.run(run_phase(bootstrap, phase, i, home)) for i, phase in enumerate(phases)]
    print(f"{describe()}; {records} records backlog, exactly-once, {pairs} pairs")
    ratios, cpu_ratios = [], []
    for i in range(pairs):
        on, off = sorted(runs[2 * i:2 * i + 2], key=lambda r: not r.phase.metrics)
        ratios.append(on.throughput / off.throughput)
        cpu_on, cpu_off = (r.cpu / r.phase.records * 1e6 for r in (on, off))
        cpu_ratios.append(cpu_on / cpu_off)
        print(f"pair {i + 1}: on {on.throughput:,.0f}/s ({cpu_on:.0f} us CPU a record), "
              f"off {off.throughput:,.0f}/s ({cpu_off:.0f} us), throughput ratio {ratios[-1]:.3f}")
    print(f"median throughput ratio metrics on/off: {statistics.median(ratios):.3f}; median worker CPU a record "
          f"on/off: {statistics.median(cpu_ratios):.3f}")
    counting = counting_cost()
    cpu_off = statistics.median(r.cpu / r.phase.records * 1e6 for r in runs if not r.phase.metrics)
    print(f"the counting alone (Tally.folded and the fold histogram, {COUNTED:,} records in a loop): "
          f"{counting * 1000:.0f} ns a record, {counting / cpu_off:.2%} of the worker's CPU a record without metrics "
          f"({cpu_off:.0f} us)")


COUNTED = 1_000_000


def counting_cost() -> float:
    """Microseconds a record of what metrics add to the worker's path, timed alone (no broker, no noise of the
    machine's other processes worth the name): its physical cost, beside the end-to-end ratio above."""
    from streams.core.outputs import Emit
    from streams.worker.metrics import Tally

    tally, outputs = Tally(), [Emit("scaling-decisions", "pool-a", {"seq": 1})]
    started = time.perf_counter()
    for _ in range(COUNTED):
        tally.folded("plugin_decider", outputs)
        tally.fold.observe(0.00003)
    return (time.perf_counter() - started) / COUNTED * 1e6


def ceiling(records: int, rounds: int) -> None:
    """Backlog rates in `rounds` rounds, each measure beside the transactional loop of its own round, and the
    processor time a record of the process that drains the backlog and of the broker: what bounds the worker's
    exactly-once backlog against the loop (issue 49's goal) on a machine whose two cores the broker, the bench
    and the worker share."""
    names = ("aiokafka transactional loop", "the same, a producer per partition", "Faust agent that only counts",
             "the same, on the worker delivery path", "tribunal backlog, exactly-once", "the same, at-least-once",
             "the transactional loop writing the worker's outputs", "the same, folding them itself")
    rows: list[list[tuple[float, float, float, float]]] = []  # per round, per measure: records/s, its process's,
    # the broker's and the bench's processor time a record (us; nan where not measured)
    with local_stack("e2e-ceiling") as cluster:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        broker = cluster.pid(cluster.servers()[1])
        assert broker is not None
        loop_in_child(bootstrap, "warm", records, False, broker)  # a fresh broker's first backlog runs slower
        for i in range(rounds):
            row = [loop_in_child(bootstrap, f"tbase{i}", records, False, broker),
                   loop_in_child(bootstrap, f"pbase{i}", records, True, broker)]
            row += [(*bare_faust(bootstrap, records, path, i), math.nan, math.nan) for path in ("faust", "worker")]
            for n, guarantee in enumerate(("exactly_once", "at_least_once")):
                worker = asyncio.run(run_phase(bootstrap, Phase("backlog", records, guarantee=guarantee),
                                               100 + 2 * i + n, home, broker))
                row.append((worker.throughput, worker.cpu / records * 1e6, worker.broker_cpu / records * 1e6,
                            worker.bench_cpu / records * 1e6))
            row += [loop_in_child(bootstrap, f"{writes}{i}", records, False, broker, writes)
                    for writes in ("outputs", "fold")]
            rows.append(row)
    print(f"{describe()}; {records} records backlog, {rounds} rounds; per measure: records/s (ratio to the round's "
          f"transactional loop), the draining process's processor time a record + the broker's + this bench's (us)")
    for i, row in enumerate(rows):
        print(f"round {i + 1}: " + "; ".join(
            f"{name} {rate:,.0f}/s ({rate / row[0][0]:.2f}), {cpu:.0f} us"
            + ("" if math.isnan(b) else f" + {b:.0f} + {bench:.0f}")
            for name, (rate, cpu, b, bench) in zip(names, row, strict=True)))
    for j, name in enumerate(names):
        ratios = [row[j][0] / row[0][0] for row in rows]
        cpus = [row[j][1] for row in rows]
        brokers = [row[j][2] for row in rows if not math.isnan(row[j][2])]
        print(f"{name}: median {statistics.median(r[j][0] for r in rows):,.0f}/s, ratio to the transactional "
              f"loop {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); processor time a record "
              f"{statistics.median(cpus):.0f} us" + (f", the broker's {statistics.median(brokers):.0f} us" if brokers
                                                     else ""))
    system = {j: [sum(row[j][1:]) for row in rows] for j in range(len(names))
              if not math.isnan(rows[0][j][2])}  # where all three were measured
    shares = [loop / worker for loop, worker in zip(system[0], system[4], strict=True)]
    print("processor time a record of the drain, the broker and the bench together: "
          + ", ".join(f"{names[j]} {statistics.median(system[j]):.0f} us" for j in system)
          + f"; the loop's / the worker's {statistics.median(shares):.2f}")
    to_partition = [row[4][0] / row[1][0] for row in rows]
    print(f"tribunal backlog to the loop with a producer per partition: median ratio "
          f"{statistics.median(to_partition):.2f} ({min(to_partition):.2f}-{max(to_partition):.2f})")
    to_outputs = [row[4][0] / row[6][0] for row in rows]
    print(f"tribunal backlog to the loop writing the worker's outputs: median ratio "
          f"{statistics.median(to_outputs):.2f} ({min(to_outputs):.2f}-{max(to_outputs):.2f})")
    ratio("worker exactly-once backlog / the transactional loop folding the same records and writing the same bytes",
          [row[4][0] / row[7][0] for row in rows])


def latency_rounds(rate: float, seconds: float, rounds: int, warm: float) -> None:
    """The exactly-once p99 at `rate` of the worker and of the bare transactional loop, `rounds` times, alternating
    which goes first, each on topics of its own: per round the ratio, and their median (issue 49's latency goal;
    one round's p99 moves with its first second)."""
    ratios, warm_ratios, partition_ratios = [], [], []
    with local_stack("e2e-latency") as cluster:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        asyncio.run(loop_latency(bootstrap, "warm", rate, 2, True))  # a fresh broker's first transactions are slower
        for i in range(rounds):
            order = ("loop", "partitions", "worker") if i % 2 == 0 else ("worker", "partitions", "loop")
            got: dict[str, Latency] = {}
            for who in order:
                if who == "worker":
                    phase = Phase(f"{rate:,.0f}/s exactly-once", int(rate * seconds), rate, warm=warm)
                    result = asyncio.run(run_phase(bootstrap, phase, 200 + i, home))
                    got[who] = latency_of(result.seen)
                    print("  " + breakdown(result), flush=True)
                else:
                    got[who] = asyncio.run(loop_latency(bootstrap, f"{who}{i}", rate, seconds, True,
                                                        per_partition=who == "partitions", warm=warm))
            loop, partitions, worker = got["loop"], got["partitions"], got["worker"]
            ratios.append(worker.p99 / loop.p99)
            warm_ratios.append(worker.warm / loop.warm)
            partition_ratios.append(partitions.p99 / loop.p99)
            print(f"round {i + 1} ({', '.join(order)}): transactional loop p50 {loop.p50:.1f} / p99 {loop.p99:.1f} "
                  f"ms ({loop.warm:.1f}); with a producer per partition p50 {partitions.p50:.1f} / p99 "
                  f"{partitions.p99:.1f} ms ({partitions.warm:.1f}); worker p50 {worker.p50:.1f} / p99 "
                  f"{worker.p99:.1f} ms ({worker.warm:.1f}); worker p99 ratio {ratios[-1]:.2f} ({warm_ratios[-1]:.2f})",
                  flush=True)
    print(f"{describe()}; {rate:g}/s for {seconds:g} s, exactly-once, {rounds} rounds, each side's topics new each "
          f"round and written for {warm:g} s first, not measured")
    print(f"worker p99 / the transactional loop's: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}); without the first {WARM_UP:g} s of inputs: median "
          f"{statistics.median(warm_ratios):.2f} ({min(warm_ratios):.2f}-{max(warm_ratios):.2f}); the loop with a "
          f"producer per partition / the loop: median {statistics.median(partition_ratios):.2f} "
          f"({min(partition_ratios):.2f}-{max(partition_ratios):.2f})")
    ratio(f"exactly-once p99 at {rate:,.0f}/s / the transactional loop's", ratios)


def loop_in_child(bootstrap: str, name: str, records: int, per_partition: bool, broker: int,
                  writes: str | None = None) -> tuple[float, float, float, float]:
    """`loop_backlog` (transactional) with the loop in a process of its own, started before the backlog is
    produced: records/s, the loop's processor time a record, the broker's and this process's (its producer and
    reader; us). `writes`: "outputs", the worker's outputs of each record, folded beforehand; "fold", the same,
    folded in the loop (`worker_outputs`); None, a record naming its cause."""
    asyncio.run(create(bootstrap, [f"{name}-in", f"{name}-out"] + ([f"{name}-out-state"] if writes else [])))
    context = multiprocessing.get_context("fork")
    stop, ready = context.Event(), context.Event()
    child = context.Process(target=_loop_process, args=(bootstrap, name, per_partition, stop, ready, writes, records))
    child.start()
    pid = child.pid
    assert pid is not None
    try:
        if not ready.wait(60):
            raise RuntimeError(f"the loop {name} did not start")
        cpu, broker_cpu, bench_cpu = worker_cpu(pid), worker_cpu(broker), time.process_time()
        rate = asyncio.run(backlog_through(bootstrap, name, records))
        cpu, broker_cpu = worker_cpu(pid) - cpu, worker_cpu(broker) - broker_cpu
        bench_cpu = time.process_time() - bench_cpu
    finally:
        stop.set()
        child.join(60)
    return rate, cpu / records * 1e6, broker_cpu / records * 1e6, bench_cpu / records * 1e6


def _loop_process(bootstrap: str, name: str, per_partition: bool, stop: Any, ready: Any, writes: str | None,
                  records: int) -> None:
    """`baseline_loop` (transactional) until `stop` is set; `ready` once its consumer and producers started."""
    emit = None if writes is None else worker_outputs(f"{name}-out", writes == "fold", records)

    async def run() -> None:
        stopping = asyncio.Event()
        loop = asyncio.create_task(baseline_loop(bootstrap, f"{name}-in", f"{name}-out", stopping, True,
                                                 per_partition, emit))
        await asyncio.sleep(2)  # its consumer joins the group, its producers start with the first batch
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        stopping.set()
        await loop

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--high-rate", type=float, default=5000.0)
    parser.add_argument("--high-seconds", type=float, default=30.0)
    parser.add_argument("--keep", type=Path, help="copy the workers' logs to this directory")
    parser.add_argument("--metrics-pairs", type=int, metavar="N",
                        help="only the cost of metrics: N backlog runs with and N without, alternating")
    parser.add_argument("--ceiling", type=int, metavar="N",
                        help="only the backlogs: N rounds of the loops, the counting agents and the worker")
    parser.add_argument("--latency", type=int, metavar="N",
                        help="only the exactly-once latency at --rate: N rounds of the loop and the worker")
    parser.add_argument("--warm", type=float, default=1.0,
                        help="seconds at the rate through each side's new topics before a latency is measured")
    args = parser.parse_args()
    if args.latency:
        latency_rounds(args.rate, args.seconds, args.latency, args.warm)
        return
    if args.ceiling:
        ceiling(args.records, args.ceiling)
        return
    if args.metrics_pairs:
        metrics_cost(args.records, args.metrics_pairs)
        return
    paced = int(args.rate * args.seconds)
    phases = [Phase("backlog, exactly-once", args.records), Phase("backlog, metrics off", args.records, metrics=False),
              Phase("1,000/s exactly-once", paced, args.rate, warm=args.warm),
              Phase("1,000/s at-least-once", paced, args.rate, "at_least_once", warm=args.warm),
              Phase(f"{args.high_rate:,.0f}/s exactly-once", int(args.high_rate * args.high_seconds), args.high_rate,
                    warm=args.warm),
              Phase("backlog, misrouted", args.records, wrong=True)]
    with local_stack("e2e") as cluster:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        base = asyncio.run(run_baseline(bootstrap, args.records, args.rate, args.seconds, args.warm))
        ours = [asyncio.run(run_phase(bootstrap, phase, i, home)) for i, phase in enumerate(phases)]
        faust_only, _ = bare_faust(bootstrap, args.records)
        faust_path, _ = bare_faust(bootstrap, args.records, "worker")
        if args.keep:
            shutil.copytree(home, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*kafka*", "*zk*"))
    print(f"{describe()}; {args.records} records backlog; latency at {args.rate:g}/s for {args.seconds:g}s "
          f"and {args.high_rate:g}/s for {args.high_seconds:g}s")
    print(f"{'':<36} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8}  (p99 without the first {WARM_UP:g} s of inputs)")
    throughput, plain, txn, txn_throughput, partition_throughput = base
    print(f"{'aiokafka loop, backlog / 1,000/s':<36} {throughput:>10,.0f} {plain.p50:>8.1f} {plain.p99:>8.1f}"
          f"  ({plain.warm:.1f})")
    print(f"{'aiokafka transactional loop, same':<36} {txn_throughput:>10,.0f} {txn.p50:>8.1f} {txn.p99:>8.1f}"
          f"  ({txn.warm:.1f})")
    print(f"{'the same, a producer per partition':<36} {partition_throughput:>10,.0f}")
    print(f"{'Faust agent that only counts':<36} {faust_only:>10,.0f}  (drains a backlog already produced)")
    print(f"{'the same, on the worker delivery path':<36} {faust_path:>10,.0f}  (faust_private.events: the ceiling "
          f"of any tribunal worker; {faust_path / txn_throughput:.2f} of the transactional loop)")
    for r in ours:
        if r.phase.rate is None:
            print(f"{'tribunal ' + r.phase.name:<36} {r.throughput:>10,.0f}")
        else:
            p50, p99, warm = latency_of(r.seen)
            print(f"{'tribunal ' + r.phase.name:<36} {r.throughput:>10,.0f} {p50:>8.1f} {p99:>8.1f}  ({warm:.1f}; "
                  f"{r.behind} decisions outstanding when the last input was produced)")
    keyed, unmeasured, misrouted = ours[0], ours[1], ours[-1]
    print(f"throughput ratio metrics on/off (backlog, exactly-once): {keyed.throughput / unmeasured.throughput:.3f}")
    print(f"throughput ratio tribunal/Faust-only agent: {keyed.throughput / faust_only:.2f}")
    at_rate = next(r for r in ours if r.phase.rate is not None and r.phase.guarantee == "exactly_once")
    p99 = latency_of(at_rate.seen)[1]
    print(f"exactly-once ratios to the bare transactional loop (issue 49): backlog "
          f"{keyed.throughput / txn_throughput:.2f}; p99 at {args.rate:g}/s {p99 / txn.p99:.2f}; backlog to the "
          f"loop with a producer per partition {keyed.throughput / partition_throughput:.2f}")
    print(f"throughput ratio tribunal/baseline: {keyed.throughput / throughput:.2f}; misrouted/baseline: "
          f"{misrouted.throughput / throughput:.2f}; misrouted/keyed: {misrouted.throughput / keyed.throughput:.2f}")
    for r in ours:
        print(breakdown(r))


if __name__ == "__main__":
    main()
