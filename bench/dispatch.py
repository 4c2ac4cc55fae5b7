"""End-to-end dispatches through Kafka with exactly-once: assign -> JobStarted visible -> finish.

A fresh local stack (free ports), a `tribunal worker` and a `tribunal dispatch ticker` (100 ms) per phase,
each on topics of its own; this process is the tenants: it follows `job-starts` (read_committed)
and finishes every job the moment its start is visible, so a slot frees and the next job starts.
  throughput  a backlog of --jobs startable jobs (assigns of 1,000), the namespace cap --cap; the
              figure is JobStarted visible per second once a second has passed, over --seconds;
              one namespace, then ten (cap --cap / 10 each). Peer: the bare aiokafka loop of
              bench/e2e.py (consume one record, produce one) on the same broker, same run: a
              dispatch is one input (the finish) and one output (the start) plus its outcome.
  latency     one job every 5 ms (200/s) for --seconds, each expected 500 ms after it is assigned;
              start delay = JobStarted visible minus expected start (the tick that reaches it comes
              within one tick, then the fold and one commit; the ticker's and this process's clocks
              are the same machine's).
  fairness    in one namespace, nine light tenants at 10 jobs/s each and one heavy tenant at 1,000/s
              (100x; capped by WorkerMaxSet at half the namespace's cap); the light tenants' start
              delay with the heavy one on, and off.
Run: `.venv/bin/python bench/dispatch.py [--seconds 15]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from e2e import TRIBUNAL, _p99, collect, loop_backlog, produce, reader, start_worker, worker_cpu, worker_env  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]


@dataclass
class Tenants:
    """Follows job-starts; finishes each started job at once; records (visible-at, start) pairs."""

    bootstrap: str
    prefix: str
    seen: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    written: list[float] = field(default_factory=list)  # each start's record timestamp (the worker's produce), s
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, ready: asyncio.Event) -> None:
        consumer = await reader(self.bootstrap, self.prefix + "job-starts")
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=1, enable_idempotence=True)
        await producer.start()
        ready.set()
        topic = self.prefix + "dispatch-commands"
        try:
            while not self.stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                now = time.time()
                for records in batch.values():
                    for r in records:
                        start = orjson.loads(r.value)
                        self.seen.append((now, start))
                        self.written.append(r.timestamp / 1000)
                        await producer.send(topic, orjson.dumps({"type": "JobFinished", "namespace": start["namespace"],
                                                                 "uuid": start["uuid"]}), key=r.key)
        finally:
            await producer.stop()
            await consumer.stop()


def stamped(values: list[dict[str, Any]]) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of each command as it is sent: an assign marked "now+500" is expected half a second
    from the moment it is sent (its jobs' `info` says when, for the tenants' delay)."""
    for v in values:
        if v.get("start") == "now+500":
            at = int(time.time() * 1000) + 500
            v = {**v, "start": at, "end": at, "jobs": [{**j, "info": str(at)} for j in v["jobs"]]}
        yield v["namespace"].encode(), orjson.dumps(v)


def assign(namespace: str, worker: str, n: int, start: Any = 0) -> dict[str, Any]:
    return {"type": "JobsAssigned", "namespace": namespace, "worker": worker, "start": start, "end": start,
            "jobs": [{"external_id": f"{worker}-{i}", "timeout_ms": 3_600_000} for i in range(n)]}


@dataclass
class Run:
    seen: list[tuple[float, dict[str, Any]]]
    written: list[float]
    cpu: float
    seconds: float


async def phase(bootstrap: str, zk: str, home: Path, name: str, setup: list[dict[str, Any]],
                load: list[dict[str, Any]], rate: float | None, seconds: float) -> Run:
    env, _ = worker_env(bootstrap, name, home)
    env = {**env, "ZOOKEEPER_HOSTS": zk}
    worker = start_worker(env)
    namespaces = sorted({v["namespace"] for v in setup})  # ticked from the start: the setup gives them no work
    with Path(home / f"{name}-ticker.log").open("wb") as log:
        ticker = subprocess.Popen([TRIBUNAL, "dispatch", "ticker", "--root", f"/{name}", "--interval-ms", "100",
                                   *(f"--namespace={ns}" for ns in namespaces)], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    tenants = Tenants(bootstrap, f"{name}.")
    ready = asyncio.Event()
    task = asyncio.create_task(tenants.run(ready))
    try:
        await asyncio.wait([task, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # the tenants could not start: say why
        await produce(bootstrap, f"{name}.dispatch-commands", stamped(setup))
        if not await collect(bootstrap, f"{name}.ticks", 1, 120):
            raise RuntimeError(f"the ticker never ticked; see {home / f'{name}-ticker.log'}")
        if not await collect(bootstrap, f"{name}.dispatcher-health", len(setup), 120):  # the worker is deciding
            raise RuntimeError(f"the worker never answered; see {env['TRIBUNAL_DATA_DIR']}.log")
        cpu, started = worker_cpu(worker.pid), time.monotonic()
        feeding = asyncio.create_task(produce(bootstrap, f"{name}.dispatch-commands", stamped(load), rate))
        await asyncio.sleep(seconds)
        await feeding
        tenants.stop.set()
        await task
        return Run(tenants.seen, tenants.written, worker_cpu(worker.pid) - cpu, time.monotonic() - started)
    finally:
        task.cancel()
        for proc in (ticker, worker):
            proc.terminate()
            proc.wait(60)


def rate_after(seen: list[tuple[float, dict[str, Any]]], skip: float = 1.0) -> float:
    """Starts visible per second, from `skip` seconds after the first to the last."""
    times = sorted(at for at, _ in seen)
    window = [t for t in times if t >= times[0] + skip]
    return len(window) / (window[-1] - window[0]) if len(window) > 1 else 0.0


def delays(seen: list[tuple[float, dict[str, Any]]], workers: set[str] | None = None) -> tuple[float, float]:
    """p50 and p99 in ms of visible-at minus the job's expected start (carried in its `info`): from the
    moment it became startable to its start being visible."""
    ms = sorted(at * 1000 - int(s["info"]) for at, s in seen if workers is None or s["worker"] in workers)
    return statistics.median(ms), _p99(ms)


def stages(run: Run) -> str:
    """Where the start delay goes, p50 / p99 ms of each stage: the tick that reached the expected start
    (`started_at`, the broker's stamp of that tick, minus the expected start: the ticker's interval and its
    send), the worker (its write of JobStarted minus that stamp: fold, produce) and the commit (visible to
    read_committed minus the write)."""
    tick = sorted(float(s["started_at"] - int(s["info"])) for _, s in run.seen)
    fold = sorted(w * 1000 - s["started_at"] for w, (_, s) in zip(run.written, run.seen, strict=True))
    commit = sorted((at - w) * 1000 for w, (at, _) in zip(run.written, run.seen, strict=True))
    return ", ".join(f"{name} {statistics.median(ms):.1f} / {_p99(ms):.1f}"
                     for name, ms in (("tick", tick), ("worker", fold), ("commit", commit)))


async def main_async(args: argparse.Namespace, cluster: Any) -> None:
    bootstrap, home, zk = cluster.topology.bootstrap, cluster.topology.home, cluster.topology.zookeeper_hosts
    loop_rate = 0.0 if args.latency_only else await loop_backlog(bootstrap, "base", 20_000, False)
    results = []
    for label, spaces in () if args.latency_only else (("one namespace", 1), ("ten namespaces", 10)):
        cap = args.cap // spaces
        setup = [{"type": "MaxThreadsSet", "namespace": f"ns{i}", "max": cap} for i in range(spaces)]
        load = [assign(f"ns{b % spaces}", f"w{b % 7}", 1_000) for b in range(args.jobs // 1_000)]
        run = await phase(bootstrap, zk, home, f"tp{spaces}", setup, load, None, args.seconds)
        results.append((label, rate_after(run.seen), run.cpu / run.seconds, len(run.seen)))
    n = int(200 * args.seconds)
    lat = await phase(bootstrap, zk, home, "lat", [{"type": "MaxThreadsSet", "namespace": "lat", "max": 10_000}],
                      [assign("lat", f"w{i % 5}", 1, "now+500") for i in range(n)], 200, args.seconds)
    fair = []
    for heavy in () if args.latency_only else (False, True):
        setup = [{"type": "MaxThreadsSet", "namespace": "fair", "max": 2_000},
                 {"type": "WorkerMaxSet", "namespace": "fair", "worker": "heavy", "max": 1_000}]
        load = []
        for _ in range(int(args.seconds * 10)):  # every 100 ms: 1 job per light tenant, 100 for the heavy
            load += [assign("fair", f"light{i}", 1, "now+500") for i in range(9)]
            if heavy:
                load.append(assign("fair", "heavy", 100, "now+500"))
        per_second = len(load) / args.seconds
        run = await phase(bootstrap, zk, home, f"fair{int(heavy)}", setup, load, per_second, args.seconds)
        fair.append(delays(run.seen, workers={f"light{i}" for i in range(9)}))
    print(f"{describe()}; ticker every 100 ms, worker commit interval 0.1 s; {args.seconds:g} s a phase")
    p50, p99 = delays(lat.seen)
    print(f"start delay at 200 jobs/s (visible minus expected start): p50 {p50:.1f} ms, p99 {p99:.1f} ms "
          f"(p50 / p99 ms by stage: {stages(lat)})")
    if args.latency_only:
        return
    print(f"bare aiokafka loop (consume one, produce one), backlog: {loop_rate:,.0f} records/s")
    for label, rate, cpu, total in results:
        print(f"dispatches/s, {label} (cap {args.cap} in all, backlog {args.jobs:,}): {rate:,.0f} "
              f"({rate / loop_rate:.2f} of the loop; worker {cpu:.0%} of a core; {total:,} starts seen)")
    print(f"light tenants' start delay, heavy tenant off: p50 {fair[0][0]:.1f} p99 {fair[0][1]:.1f} ms; "
          f"on (100x): p50 {fair[1][0]:.1f} p99 {fair[1][1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--jobs", type=int, default=120_000)
    parser.add_argument("--cap", type=int, default=2_000)
    parser.add_argument("--latency-only", action="store_true", help="Only the start-delay phase")
    os.environ.setdefault("TRIBUNAL_LOG_LEVEL", "warning")
    with local_stack("dispatch") as cluster:  # outside the event loop: its start-up check runs one of its own
        asyncio.run(main_async(parser.parse_args(), cluster))


if __name__ == "__main__":
    main()
