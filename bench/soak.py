"""The soak: 1,000,000 records over 1,000 pools and 100 scheduler groups with churn, through one worker.

A fresh local stack and `tribunal worker` (exactly-once). Every step of 100,000 records is nine
tenths metric envelopes over the pools and one tenth group events: jobs created, acquired,
released and deleted (each group holding about 200 jobs from the start), and schedulers lost and
replaced by new ones (new ids: a scheduler that left never comes back). After each step, once the worker has
folded all of it (its `/checkpoint/` page counts records), it prints the worker's resident set
size, the step's rate and the worker's CPU time per record. At the end it reads every table's
changelog and prints its live keys (latest value not a tombstone) and bytes, beside what the
records keep alive: 1,000 pools and 100 groups. Flat RSS and cost, and live keys equal to the live
pools and groups, mean nothing grows with the records.
Run: `.venv/bin/python bench/soak.py [--records 1000000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from e2e import POLICY, TRIBUNAL, produce, worker_stats  # type: ignore[import-not-found]
from machine import describe  # type: ignore[import-not-found]

from streams.clients import envelope, read_log
from streams.infra import Cluster, Topology
from streams.infra.topology import free_ports

POOLS, GROUPS, STEP = 1_000, 100, 100_000
JOBS_PER_GROUP, SCHEDULERS_PER_GROUP = 200, 10


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _stat_cpu(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu_seconds(pid: int) -> float:
    return _stat_cpu(Path(f"/proc/{pid}/stat"))


def rocksdb_cpu_seconds(pid: int) -> float:
    """CPU of the worker's RocksDB threads (flushes and compactions), named `rocksdb:*` by RocksDB."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith("rocksdb"):
                total += _stat_cpu(task / "stat")
        except OSError:
            continue  # the thread ended meanwhile
    return total


class Groups:
    """The churning groups: who is live and which jobs exist, so every event generated is valid."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_id = 0
        self.live: dict[str, list[str]] = {}
        self.jobs: dict[str, dict[str, str | None]] = {}  # group -> job -> owner

    def _scheduler(self, group: str) -> dict[str, object]:
        self.next_id += 1
        sid = f"s{self.next_id}"
        self.live[group].append(sid)
        return {"type": "SchedulerRegistered", "group": group, "scheduler": sid, "address": f"{sid}:7000",
                "fault_tolerance": 1, "alarm_threshold": 50}

    def start(self) -> list[tuple[str, dict[str, object]]]:
        """Every group at its size already (its schedulers, its jobs, every other one held): the soak then
        measures a steady state. Filled during the soak instead, the groups grew for its first 700,000
        records, and with them the cost of a group record (each `GroupHealth` lists the group's orphans
        and offers), which read as a cost growing with the records."""
        events: list[tuple[str, dict[str, object]]] = []
        for g in range(GROUPS):
            group = f"group-{g:03d}"
            self.live[group], self.jobs[group] = [], {}
            events += [("scheduler-events", self._scheduler(group)) for _ in range(SCHEDULERS_PER_GROUP)]
            for j in range(JOBS_PER_GROUP):
                self.next_id += 1
                job = f"j{self.next_id}"
                self.jobs[group][job] = None
                events.append(("job-events", {"type": "JobCreated", "group": group, "job": job}))
                if j % 2:
                    sid = self.rng.choice(self.live[group])
                    self.jobs[group][job] = sid
                    events.append(("job-events", {"type": "JobAcquired", "group": group, "job": job,
                                                  "scheduler": sid}))
        return events

    def event(self) -> tuple[str, dict[str, object]]:
        rng = self.rng
        group = f"group-{rng.randrange(GROUPS):03d}"
        live, jobs = self.live[group], self.jobs[group]
        roll = rng.random()
        if roll < 0.02:  # churn: a scheduler leaves for good, a new one registers
            if rng.random() < 0.5 and len(live) > 2:
                sid = live.pop(rng.randrange(len(live)))
                for job, owner in jobs.items():
                    if owner == sid:
                        jobs[job] = None
                return "scheduler-events", {"type": "SchedulerLost", "group": group, "scheduler": sid}
            return "scheduler-events", self._scheduler(group)
        if roll < 0.3 or not jobs:
            if len(jobs) < JOBS_PER_GROUP:
                self.next_id += 1
                job = f"j{self.next_id}"
                jobs[job] = None
                return "job-events", {"type": "JobCreated", "group": group, "job": job}
            job = rng.choice(sorted(jobs))
            del jobs[job]
            return "job-events", {"type": "JobDeleted", "group": group, "job": job}
        job = rng.choice(list(jobs))
        owner = jobs[job]
        if owner is None:
            sid = rng.choice(live)
            jobs[job] = sid
            return "job-events", {"type": "JobAcquired", "group": group, "job": job, "scheduler": sid}
        jobs[job] = None
        return "job-events", {"type": "JobReleased", "group": group, "job": job, "scheduler": owner}


def step(i: int, groups: Groups) -> dict[str, list[tuple[bytes, bytes]]]:
    by_topic: dict[str, list[tuple[bytes, bytes]]] = {"plugin_decider": [], "scheduler-events": [], "job-events": []}
    for n in range(STEP):
        if n % 10 == 9:
            topic, event = groups.event()
            by_topic[topic].append((str(event["group"]).encode(), json.dumps(event).encode()))
        else:
            by_topic["plugin_decider"].append((f"pool-{(i * 7919 + n) % POOLS:04d}".encode(), envelope(
                ("ats", "hadoop", "redis")[n % 3], (n * 37 + i) % 101, "plugin_decider")))
    return by_topic


async def live_keys(bootstrap: str, topic: str) -> tuple[int, int]:
    """(keys whose latest record is not a tombstone, their latest values' bytes) of a changelog."""
    latest: dict[bytes, bytes | None] = {}
    for r in await read_log(bootstrap, [topic]):
        latest[r.key] = r.value
    values = [v for v in latest.values() if v is not None]
    return len(values), sum(map(len, values))


def wait_for(port: int, records: int) -> None:
    while True:
        try:
            if worker_stats(port)["records"] >= records:
                return
        except OSError:
            pass
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(describe())
    groups = Groups(random.Random(args.seed))
    with tempfile.TemporaryDirectory(prefix="tribunal-soak-") as tmp:
        zk, kafka, controller, port = free_ports(4)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=kafka, controller_port=controller, zk_port=zk))
        cluster.up()
        bootstrap = cluster.topology.bootstrap
        env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": "soak.",
               "TRIBUNAL_APP_ID": "soak", "TRIBUNAL_DATA_DIR": str(Path(tmp) / "w"), "TRIBUNAL_WEB_PORT": str(port),
               "TRIBUNAL_LOG_LEVEL": "warning"}
        subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)
        worker = subprocess.Popen([TRIBUNAL, "worker"], env=env, stdout=(Path(tmp) / "w.log").open("wb"),
                                  stderr=subprocess.STDOUT)
        try:
            asyncio.run(produce(bootstrap, "soak.policies",
                                [(f"pool-{i:04d}".encode(), json.dumps(POLICY).encode()) for i in range(POOLS)]))
            start: dict[str, list[tuple[bytes, bytes]]] = {}
            for topic, event in groups.start():
                start.setdefault(topic, []).append((str(event["group"]).encode(), json.dumps(event).encode()))
            for topic, pairs in start.items():  # schedulers first: a job acquired by one not yet registered stays
                asyncio.run(produce(bootstrap, f"soak.{topic}", pairs))  # an orphan (fine, but not the setup meant)
            done = POOLS + sum(map(len, start.values()))
            wait_for(port, done)
            print(f"{'records':>10} {'RSS MB':>8} {'records/s':>10} {'CPU us/record':>14} {'of it RocksDB':>13}")
            print(f"{0:>10,} {rss_mb(worker.pid):>8.1f}")
            for i in range(args.records // STEP):
                records = step(i, groups)
                started, cpu, rocks = time.monotonic(), cpu_seconds(worker.pid), rocksdb_cpu_seconds(worker.pid)
                for topic, pairs in records.items():
                    asyncio.run(produce(bootstrap, f"soak.{topic}", pairs))
                done += STEP
                wait_for(port, done)
                rate = STEP / (time.monotonic() - started)
                per_record = (cpu_seconds(worker.pid) - cpu) / STEP * 1e6
                rocks_per_record = (rocksdb_cpu_seconds(worker.pid) - rocks) / STEP * 1e6
                print(f"{(i + 1) * STEP:>10,} {rss_mb(worker.pid):>8.1f} {rate:>10,.0f} {per_record:>14.0f} "
                      f"{rocks_per_record:>13.0f}", flush=True)
            print(f"\n{'changelog':<28} {'live keys':>10} {'bytes':>12}   (alive: {POOLS} pools, {GROUPS} groups)")
            for table in ("pool-state", "pool-policies", "group-state", "group-buckets"):
                keys, size = asyncio.run(live_keys(bootstrap, f"soak-{table}-changelog"))
                print(f"{table:<28} {keys:>10,} {size:>12,}")
        finally:
            worker.terminate()
            worker.wait(60)
            cluster.down()


if __name__ == "__main__":
    main()
