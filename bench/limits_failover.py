"""Time from a scheduler's death (SIGKILL) to all of its jobs owned by live schedulers again.

A fresh local stack (free ports), `tribunal worker`, `tribunal groups bridge` and three
`tribunal groups scheduler` processes with --session-timeout seconds of ZooKeeper session; --jobs jobs.
Each round kills the scheduler holding the most jobs and times, by polling ZooKeeper every 20 ms:
  expiry    kill -> its registration node is gone (ZooKeeper noticed: the session timeout);
  re-owned  kill -> every job has an owner node again, none of them the dead scheduler's;
the difference is tribunal's part: watch -> bridge -> Kafka -> worker -> offers -> schedulers.
The dead scheduler restarts between rounds. Run: `.venv/bin/python bench/limits_failover.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient
from machine import describe  # type: ignore[import-not-found]

from streams.infra import Cluster, Topology
from streams.infra.topology import free_ports

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
ROOT = "/bench"


def owners(zk: KazooClient) -> dict[str, str]:
    out: dict[str, str] = {}
    if not zk.exists(f"{ROOT}/g/owners"):
        return out
    for job in zk.get_children(f"{ROOT}/g/owners"):
        data = zk.exists(f"{ROOT}/g/owners/{job}") and zk.get(f"{ROOT}/g/owners/{job}")[0]
        if data:
            out[job] = data.decode()
    return out


def wait(what: str, done: object, timeout: float = 120.0) -> float:
    start = time.monotonic()
    while not done():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out waiting until {what}")
        time.sleep(0.02)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tribunal-failover-") as tmp:
        zk_port, kafka, controller, web = free_ports(4)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=kafka, controller_port=controller, zk_port=zk_port))
        cluster.up()
        procs: dict[str, subprocess.Popen[bytes]] = {}
        env = {**os.environ, "KAFKA_BOOTSTRAP": cluster.topology.bootstrap,
               "ZOOKEEPER_HOSTS": cluster.topology.zookeeper_hosts, "TRIBUNAL_APP_ID": "bench-failover",
               "TRIBUNAL_DATA_DIR": f"{tmp}/worker", "TRIBUNAL_WEB_PORT": str(web)}
        timeout = str(args.session_timeout)

        def start(name: str, *argv: str) -> None:
            with open(f"{tmp}/{name}.log", "ab") as log:
                procs[name] = subprocess.Popen([TRIBUNAL, *argv], env=env, stdout=log, stderr=subprocess.STDOUT)

        def scheduler(sid: str) -> None:
            start(sid, "groups", "scheduler", "--group", "g", "--id", sid, "--root", ROOT, "--session-timeout", timeout,
                  "--alarm-threshold", str(args.jobs))

        zk = KazooClient(hosts=cluster.topology.zookeeper_hosts)
        zk.start(30)
        rows = []
        try:
            subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)
            start("worker", "worker")
            start("bridge", "groups", "bridge", "--root", ROOT, "--snapshot-interval", "5", "--session-timeout",
                  timeout)
            for sid in "ABC":
                scheduler(sid)
            for j in range(args.jobs):
                zk.ensure_path(f"{ROOT}/g/jobs/job{j:03d}")
            wait("every job is owned", lambda: len(owners(zk)) == args.jobs, timeout=180)
            for _ in range(args.rounds):
                held = owners(zk)
                victim = max("ABC", key=lambda s: list(held.values()).count(s))
                count = list(held.values()).count(victim)
                procs[victim].kill()
                killed = time.monotonic()
                expired = wait("the session expires", lambda v=victim: not zk.exists(f"{ROOT}/g/schedulers/{v}"))
                reowned = wait("every job is re-owned", lambda v=victim: (
                    len(o := owners(zk)) == args.jobs and v not in o.values()))
                rows.append((victim, count, expired - killed, reowned - killed))
                procs[victim].wait()
                scheduler(victim)
                wait("the scheduler is back", lambda v=victim: zk.exists(f"{ROOT}/g/schedulers/{v}") is not None)
        finally:
            zk.stop()
            for proc in procs.values():
                proc.terminate()
            for proc in procs.values():
                proc.wait(60)
            cluster.down()
    print(describe())
    print(f"{args.jobs} jobs, 3 schedulers, ZooKeeper session timeout {args.session_timeout:g}s")
    print(f"{'killed':>6} {'jobs':>5} {'expiry s':>9} {'re-owned s':>11} {'tribunal s':>11}")
    for victim, count, expiry, reowned in rows:
        print(f"{victim:>6} {count:>5} {expiry:>9.2f} {reowned:>11.2f} {reowned - expiry:>11.2f}")
    print(f"median re-owned {statistics.median(r[3] for r in rows):.2f}s, "
          f"of which after expiry {statistics.median(r[3] - r[2] for r in rows):.2f}s")


if __name__ == "__main__":
    main()
