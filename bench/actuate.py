"""From a decision visible downstream to the target running it, and an actuator's restart (issue 37).

A fresh local stack and `tribunal worker`. Load reports at --rate a second alternate web 90 and web 10, so
that every decision moves web between 1 and 5 instances (the pool releases eagerly). Beside the actuator, a
read_committed consumer (a thread of its own) notes when each decision became visible; the actuator (in this
process, election off) calls its target through a wrapper that notes when each change began and ended. Per
change applied: latency = end - visible; the target's own time = end - begin; the actuator's part = begin -
visible (the goal: p99 <= 100 ms). Decisions that arrive while a change is being applied are not applied one by
one: the next change brings the newest (counted as superseded). Targets: `process` (`sleep` copies: 4 started
or stopped a change) and `exec` (`true`, once per app changed).

Restart: `tribunal pools actuate --target process` (a process of its own) SIGKILLed, a decision made while it is
down, then started again: from the new process's start to the copies matching the decision. Without the
election, and with it (a SIGKILLed actuator holds the election until its ZooKeeper session expires: set by
--session-timeout).
Run: `.venv/bin/python bench/actuate.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from e2e import start_worker, worker_env  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

from streams import kafka
from streams.clients import envelope
from streams.decider import DeciderClient
from streams.decider.actuator import Actuator
from streams.decider.targets import Change, Target
from streams.decider.targets.command import CommandTarget
from streams.decider.targets.process import ProcessTarget
from streams.processes.proc import start_time
from streams.settings import Settings

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 80], "Number": 0},
        {"Metrical": [80, 100], "Number": 4}]


def policy() -> Any:
    from schemas.policy import DeciderPolicy

    return DeciderPolicy.model_validate({
        "kind": "decider", "version": "b1", "capacity": 8, "initial": {"web": 1, "batch": 1},
        "apps": [{"App": "web", "Priority": 1, "MinNum": 1, "Spec": SPEC, "release": "eager"},
                 {"App": "batch", "Priority": 2, "MinNum": 1, "Spec": SPEC, "release": "eager"}]})


class Timed:
    """A target whose every change is timed: (seq, began, ended), wall clock."""

    def __init__(self, inner: Target) -> None:
        self.inner, self.name = inner, inner.name
        self.changes: list[tuple[int, float, float]] = []

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return await self.inner.observe(pool, apps)

    async def apply(self, change: Change) -> None:
        began = time.time()
        try:
            await self.inner.apply(change)
        finally:
            self.changes.append((change.seq, began, time.time()))

    async def close(self) -> None:
        await self.inner.close()


def watch(bootstrap: str, topic: str, pool: str, seen: dict[int, float], stop: threading.Event) -> threading.Thread:
    """Note when each of the pool's decisions becomes visible to a read_committed consumer (a thread, own loop)."""
    async def run() -> None:
        consumer = kafka.consumer(bootstrap, topic, auto_offset_reset="latest")
        await consumer.start()
        try:
            for tp in consumer.assignment():
                await consumer.position(tp)
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                now = time.time()
                for records in batch.values():
                    for r in records:
                        value = json.loads(r.value)
                        if value["pool"] == pool:
                            seen.setdefault(value["seq"], now)
        finally:
            await consumer.stop()

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    return thread


def ms(values: list[float]) -> str:
    values = sorted(values)
    return f"p50 {statistics.median(values) * 1000:7.1f} ms, p99 {values[int(len(values) * 0.99)] * 1000:7.1f} ms"


async def latency(settings: Settings, pool: str, target: Target, rate: float, seconds: float) -> None:
    timed = Timed(target)
    seen: dict[int, float] = {}
    stop = threading.Event()
    watcher = watch(settings.kafka_bootstrap, settings.topic("scaling-decisions"), pool, seen, stop)
    actuator = Actuator(settings, pool, timed, interval=1.0, election=False)  # type: ignore[arg-type]
    ready = asyncio.Event()
    running = asyncio.create_task(actuator.run(ready))
    await asyncio.wait_for(ready.wait(), 60)
    await asyncio.sleep(1.0)  # the watcher positioned
    producer = kafka.producer(settings.kafka_bootstrap, linger_ms=1)
    await producer.start()
    try:
        async with DeciderClient(settings, pool) as client:
            await client.apply_policy(policy())
        start, sent = time.monotonic(), 0
        while time.monotonic() - start < seconds:
            metrical = 90 if sent % 2 == 0 else 10
            await producer.send(settings.topic("plugin_decider"), envelope("web", metrical, "plugin_decider"),
                                key=pool.encode())
            sent += 1
            await asyncio.sleep(max(0.0, start + sent / rate - time.monotonic()))
        await asyncio.sleep(3.0)  # the last decisions applied
    finally:
        await producer.stop()
        actuator.stop()
        await running
        stop.set()
        watcher.join()
    applied = [(seq, began, ended) for seq, began, ended in timed.changes if seq in seen and seq > 1]
    total = [ended - seen[seq] for seq, _, ended in applied]
    own = [ended - began for _, began, ended in applied]
    part = [began - seen[seq] for seq, began, _ in applied]
    print(f"  {target.name:8s} {len(seen)} decisions visible, {len(applied)} changes applied "
          f"({len(seen) - len(applied)} superseded by a newer one first)", flush=True)
    print(f"           visible -> applied {ms(total)};  target's own time {ms(own)};  "
          f"the actuator's part {ms(part)}", flush=True)


def copies(state: Path, pool: str, app: str) -> int:
    live = 0
    for pidfile in state.glob(f"{pool}/{app}/*.pid"):
        try:
            saved = json.loads(pidfile.read_text())
        except (OSError, ValueError):
            continue
        live += start_time(saved["pid"]) == saved["started"]
    return live


async def restarts(settings: Settings, env: dict[str, str], pool: str, state: Path, times: int,
                   election: bool, session_timeout: float) -> list[float]:
    argv = [TRIBUNAL, "pools", "actuate", "--pool", pool, "--target", "process", "--command", "sleep 600",
            "--state-dir",
            str(state), "--interval", "0.2", "--grace", "1", "--session-timeout", str(session_timeout),
            "--root", f"/bench-{os.getpid()}", *(() if election else ("--no-election",))]
    log = open(state / f"actuate-{election}.log", "ab")  # noqa: SIM115 - the children write it
    process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    took = []
    async with DeciderClient(settings, pool) as client:
        await client.apply_policy(policy())
        ready = asyncio.Event()
        following = asyncio.create_task(client.run(ready))
        await ready.wait()
        while copies(state, pool, "web") != client.desired().instances.get("web"):
            await asyncio.sleep(0.05)
        for i in range(times):
            process.send_signal(signal.SIGKILL)
            process.wait()
            before = client.desired().seq
            await client.report("web", 90 if i % 2 == 0 else 10)
            while client.desired().seq == before:
                await asyncio.sleep(0.01)
            want = client.desired().instances["web"]
            began = time.monotonic()
            process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
            while copies(state, pool, "web") != want:
                await asyncio.sleep(0.01)
            took.append(time.monotonic() - began)
        following.cancel()
    process.terminate()
    process.wait(30)
    for pidfile in state.glob(f"{pool}/*/*.pid"):
        os.killpg(json.loads(pidfile.read_text())["pid"], signal.SIGKILL)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    args = parser.parse_args()
    print(describe())
    with local_stack("actuate") as cluster, tempfile.TemporaryDirectory(prefix="tribunal-copies-") as tmp:
        home, state = Path(cluster.topology.home), Path(tmp)
        env, _ = worker_env(cluster.topology.bootstrap, "actuate", home)
        env = {**env, "ZOOKEEPER_HOSTS": cluster.topology.zookeeper_hosts}
        worker = start_worker(env)
        settings = Settings(kafka_bootstrap=cluster.topology.bootstrap, topic_prefix="actuate.", app_id="actuate")
        try:
            print(f"decision visible -> applied, {args.rate:g} reports/s for {args.seconds:g} s:")
            asyncio.run(latency(settings, "lat-process", ProcessTarget("sleep 600", state, grace=1.0), args.rate,
                                args.seconds))
            asyncio.run(latency(settings, "lat-exec", CommandTarget("true {app} {instances}"), args.rate,
                                args.seconds))
            for election in (False, True):
                took = asyncio.run(restarts(settings, env, f"restart-{election}", state, args.restarts, election,
                                            args.session_timeout))
                how = f"election on, session {args.session_timeout:g} s" if election else "no election"
                print(f"restart to reconciled ({how}): " + ", ".join(f"{t:.2f}" for t in took)
                      + f" s (median {statistics.median(took):.2f})", flush=True)
        finally:
            worker.terminate()
            worker.wait(60)
            for pidfile in state.glob("*/*/*.pid"):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.killpg(json.loads(pidfile.read_text())["pid"], signal.SIGKILL)


if __name__ == "__main__":
    main()
