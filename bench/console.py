"""What the console's pages cost at the issue's sizes: a pool of 1,000 apps, a namespace of 100,000 pending jobs, a
job set of 10,000 tasks, on a fresh local stack with a worker and `tribunal console`.

Per page: the time to its first render (the whole page over HTTP, the median of --rounds), beside its source in
the same run, the worker's state page of the same key (the console adds its layout, the feed's records and,
for a pool, the plot); and the time to a live update: from a record sent (a metric, an assign of one job, a new
task count) to the console's `update` event on the page's stream and then to the page fetched again (what the
page's script does), beside the same record's output becoming visible to a read_committed consumer of the
worker's output topic (what any console waits for).
Run: `.venv/bin/python bench/console.py [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from core_fold import policy  # type: ignore[import-not-found]
from e2e import TRIBUNAL, start_worker, worker_env  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

from streams.infra.topology import free_ports
from streams.settings import Settings


def get(url: str) -> tuple[float, int]:
    """Seconds to read the whole answer, and its size."""
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as page:
        body = page.read()
    return time.perf_counter() - start, len(body)


def until(check: Any, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(str(check))
        time.sleep(0.3)


def answers(url: str) -> bool:
    try:
        get(url)
        return True
    except OSError:
        return False


async def live(console: str, kind: str, key: str, page: str, send: Any,
               visible: Any) -> tuple[float, float, float]:
    """(output visible to a consumer, the console's update event, the page fetched again), seconds from the send."""
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(
            f"{console}/events?kind={kind}&key={key}", timeout=aiohttp.ClientTimeout(total=120)) as stream:
            async for line in stream.content:
                if line.startswith(b"event: ready"):
                    break
            ready = asyncio.Event()
            seen = asyncio.ensure_future(visible(ready))
            await asyncio.wait_for(ready.wait(), 60)
            sent = time.perf_counter()
            await send()
            async for line in stream.content:
                if line.startswith(b"event: update"):
                    break
            updated = time.perf_counter() - sent
            said = (await stream.content.readline()).decode().strip()  # the update's data: its kind and key
            assert said.startswith(f"data: {kind} {key}"), said
            async with session.get(f"{console}{page}") as answer:  # what the page's script fetches
                await answer.read()
            fetched = time.perf_counter() - sent
            return (await seen) - sent, updated, fetched


async def first_output(bootstrap: str, topic: str, match: str, ready: asyncio.Event) -> float:
    """perf_counter when a record of `topic` containing `match` is visible (read_committed, from the end)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, isolation_level="read_committed",
                                auto_offset_reset="latest", group_id=None)
    await consumer.start()
    try:
        while not consumer.assignment():
            await asyncio.sleep(0.05)
        for tp in consumer.assignment():
            await consumer.position(tp)
        ready.set()
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                if any(match.encode() in (r.value or b"") for r in records):
                    return time.perf_counter()
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--apps", type=int, default=1_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=10_000)
    args = parser.parse_args()
    print(describe())
    with local_stack("console") as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap = cluster.topology.bootstrap
        env, web = worker_env(bootstrap, "console", Path(tmp))
        env = {**env, "TRIBUNAL_ZOOKEEPER_HOSTS": cluster.topology.zookeeper_hosts}
        settings = Settings(kafka_bootstrap=bootstrap, topic_prefix="console.")
        processes = [start_worker(env)]
        [port] = free_ports(1)
        console = f"http://127.0.0.1:{port}"
        try:
            until(lambda: answers(f"http://127.0.0.1:{web}/metrics"))
            path = Path(tmp) / "policy.json"
            path.write_text(json.dumps(policy(args.apps, "changes")))
            subprocess.run([TRIBUNAL, "pools", "policy", "apply", str(path), "--pool", "big"], env=env, check=True,
                           capture_output=True)
            asyncio.run(assign(settings, args.jobs))
            subprocess.run([TRIBUNAL, "shards", "tasks", "--job-set", "big", str(args.tasks)], env=env, check=True,
                           capture_output=True)
            for i in range(2):
                processes.append(subprocess.Popen(
                    [TRIBUNAL, "shards", "node", "--job-set", "big", "--id", f"n{i}", "--address", f"10.0.0.{i}:9000",
                     "--period", "3600", "--shard-root", "/console-bench"], env=env, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
            processes.append(subprocess.Popen([TRIBUNAL, "console", "--port", str(port)], env=env,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            until(lambda: answers(console + "/"))
            worker = f"http://127.0.0.1:{web}"
            metrics = [get(worker + "/metrics")[0] for _ in range(args.rounds)]
            print(f"the worker's /metrics page {statistics.median(metrics) * 1000:.1f} ms (the overview reads it "
                  "every 5 s, not per render)", flush=True)
            until(lambda: get_json(f"{worker}/dispatch/big/").get("pending", 0) >= args.jobs)
            until(lambda: b"released" in urllib.request.urlopen(console + "/job-sets/big").read()
                  or b"running" in urllib.request.urlopen(console + "/job-sets/big").read())
            pages = [("pool", "/pools/big", "/pools/big/"), ("namespace", "/namespaces/big", "/dispatch/big/"),
                     ("job set", "/job-sets/big", "/shards/big/"), ("overview", "/", None)]
            for name, page, source in pages:
                rendered = [get(console + page) for _ in range(args.rounds + 1)]  # the first one cold (a plot drawn)
                again = statistics.median(t for t, _ in rendered[1:]) * 1000
                line = (f"{name:<10} first render {rendered[0][0] * 1000:7.1f} ms, then {again:6.1f} ms "
                        f"({rendered[0][1] / 1024:.0f} KiB)")
                if source is not None:
                    beside = [get(worker + source)[0] for _ in range(args.rounds)]
                    line += f"; the worker's state page {statistics.median(beside) * 1000:.1f} ms"
                print(line, flush=True)
            print(live_rows(settings, env, console, args.rounds, args.tasks), flush=True)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=60)


def get_json(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as page:
            return dict(json.loads(page.read()))
    except OSError:
        return {}


async def assign(settings: Settings, jobs: int) -> None:
    from streams.dispatcher import DispatcherClient, JobAssign

    later = int(time.time() * 1000) + 86_400_000
    async with DispatcherClient(settings, "big") as client:
        for first in range(0, jobs, 10_000):
            built = JobAssign("w1").start(later)
            for i in range(first, min(jobs, first + 10_000)):
                built.job(f"j{i}")
            await client.assign_job(built)


def live_rows(settings: Settings, env: dict[str, str], console: str, rounds: int, tasks: int) -> str:
    from streams.dispatcher import DispatcherClient, JobAssign

    lines = []

    async def metric(i: int) -> None:
        await asyncio.to_thread(subprocess.run, [TRIBUNAL, "pools", "metric", f"app{i:04d}", "95", "--pool", "big"],
                                env=env,
                                check=True, capture_output=True)

    async def one_job(i: int) -> None:
        async with DispatcherClient(settings, "big") as client:
            await client.assign_job(JobAssign("w1").start(int(time.time() * 1000) + 86_400_000).job(f"live-{i}"))

    async def more_tasks(i: int) -> None:
        await asyncio.to_thread(subprocess.run, [TRIBUNAL, "shards", "tasks", "--job-set", "big", str(tasks + i + 1)],
                                env=env, check=True, capture_output=True)

    cases = [("pool", "pool", "/pools/big", metric, "scaling-decisions", '"pool":"big"'),
             ("namespace", "namespace", "/namespaces/big", one_job, "job-outcomes", '"JobsAccepted"'),
             ("job set", "job_set", "/job-sets/big", more_tasks, "shard-plans", '"job_set":"big"')]
    for name, kind, page, send, topic, match in cases:
        found = []
        for i in range(rounds):
            found.append(asyncio.run(live(
                console, kind, "big", page, lambda i=i, send=send: send(i),
                lambda ready, topic=topic, match=match: first_output(settings.kafka_bootstrap, settings.topic(topic),
                                                                     match, ready))))
        visible, updated, fetched = (statistics.median(f[k] for f in found) * 1000 for k in range(3))
        lines.append(f"{name:<10} live update: output visible {visible:.0f} ms, the console's update {updated:.0f} "
                     f"ms, the page fetched again {fetched:.0f} ms after the send (median of {rounds}); the console "
                     f"adds {fetched - visible:.0f} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
