"""The ZooKeeper bridge cut off from ZooKeeper, not from Kafka (issue 48): two bridges, the elected one (A) reaching
ZooKeeper through a proxy the test cuts (`tests.shards.proxy`: silence, no reset) while it still reaches every
broker; schedulers come and go on the other side of the cut.

What it proves, judged from the records on `scheduler-events` and `job-events` (each signed with its publisher and
its leadership's term, SPEC §4):

* one publisher at a time: in each topic's offset order the terms never decrease, every term is one publisher's,
  and A's last record of its first leadership comes before B's first, within two thirds of the session timeout
  of the cut (kazoo suspends A's session then; the server expires it no sooner than the whole timeout);
* healed, A publishes nothing while B leads (its lost session's watches are stopped at once), and nothing of it
  is stale: no record is dead-lettered `stale_publisher`;
* elected again once B stops, A publishes under a newer term than B's, and the limits recomputed from the log
  equal those of the membership ZooKeeper holds, which is what a fresh bridge would publish: B's snapshot
  repaired what A's watches missed during the cut, A's repairs what happened while nobody led.

Before this issue the records named no publisher: none of this could be judged from them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.clients import read_log
from streams.zk.layout import Layout
from tests.checks import publisher_violations
from tests.groups.test_groups_live import Group, latest, with_worker
from tests.helpers import Service
from tests.shards.proxy import Proxy

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SESSION = 4.0
JOBS = 6


class TwoBridges(Group):
    proxy: Proxy

    def bridge_via(self, name: str, zookeeper: str) -> Service:
        service = Service({**self.env, "ZOOKEEPER_HOSTS": zookeeper}, self.tmp / f"{name}.log", "groups", "bridge",
                          "--root", self.root, "--snapshot-interval", "2", "--session-timeout", str(SESSION))
        service.start()
        self.services[name] = service
        return service

    def leader(self) -> str:
        """The elected bridge's name (host:pid), as it wrote it to the election node on being elected."""
        return str(self.zk.get(Layout(self.root).election)[0].decode())


@pytest.fixture
def group(worker_env: dict[str, str], zookeeper: str, unique: str, tmp_path: Path) -> Iterator[TwoBridges]:
    g = with_worker(TwoBridges, worker_env, tmp_path, zookeeper, unique)
    g.proxy = Proxy(zookeeper)
    try:
        yield g
    finally:
        g.close()  # first: a bridge whose proxy is gone waits out its session's close
        g.proxy.close()


def published(kafka: str, unique: str) -> dict[str, list[Any]]:
    """The bridges' records per topic, in offset order (one group: one partition each)."""
    topics = [f"{unique}.scheduler-events", f"{unique}.job-events"]
    records = asyncio.run(read_log(kafka, topics))
    return {t: sorted((r for r in records if r.topic == t), key=lambda r: (r.partition, r.offset)) for t in topics}


def test_a_bridge_cut_off_from_zookeeper_publishes_nothing_stale_and_one_bridge_publishes_at_a_time(
        group: TwoBridges, kafka: str, zookeeper: str, unique: str) -> None:
    a = group.bridge_via("bridge-A", group.proxy.address)
    group.wait("A elected", lambda: "elected: publishing" in a.log())
    b = group.bridge_via("bridge-B", zookeeper)
    a_name = group.leader()
    for sid in ("S1", "S2"):
        group.scheduler(sid)
    group.create_jobs(JOBS)
    group.wait("every job owned", lambda: len(group.owners()) == JOBS)

    group.proxy.cut()
    cut = time.time()
    group.kill("S2")  # its registration expires while A cannot see it ...
    group.scheduler("S3")  # ... and S3 registers
    for i in range(JOBS, JOBS + 2):
        group.zk.ensure_path(group.path("jobs", f"job{i:02d}"))
    group.zk.delete(group.path("jobs", "job00"), recursive=True)
    group.wait("B elected", lambda: "elected: publishing" in b.log(), timeout=60)
    b_name = group.leader()
    assert b_name != a_name
    time.sleep(1.0)
    group.proxy.restore()
    group.wait("A's expired session noticed", lambda: "ZooKeeper session lost" in a.log(), timeout=60)
    time.sleep(3 * 2.0)  # three of B's snapshot intervals: A, healed, must stay silent

    before_b_stops = time.time()
    b.stop()
    group.wait("A elected again", lambda: a.log().count("elected: publishing") == 2, timeout=60)
    group.kill("S1")  # and one more change, seen by A's new watches
    jobs_now = sorted(group.zk.get_children(group.path("jobs")))
    schedulers_now = sorted(group.zk.get_children(group.path("schedulers")))

    def limits_match_zookeeper() -> bool:
        health = latest(kafka, f"{unique}.group-health").get("g", {})
        limits = latest(kafka, f"{unique}.rejection-limits")
        live = sorted(k.split("/", 1)[1] for k, v in limits.items() if v.get("live"))
        return (health.get("K"), health.get("S"), live) == (len(jobs_now), len(schedulers_now), schedulers_now) \
            and all(limits[f"g/{s}"]["N"] == 1 + len(jobs_now) // max(len(schedulers_now) - 1, 1)
                    for s in schedulers_now)

    group.wait(f"the limits of ZooKeeper's membership ({schedulers_now}, {len(jobs_now)} jobs)",
               limits_match_zookeeper, timeout=90)

    by_topic = published(kafka, unique)
    violations, owner = publisher_violations(r for rs in by_topic.values() for r in rs)
    assert all(by_topic.values()) and not violations, violations[:5]
    leaderships = [owner[t] for t in sorted(owner)]
    assert leaderships == [a_name, b_name, a_name], (leaderships, a_name, b_name)  # A, B, A again
    first, second, third = sorted(owner)
    everything = [(r.timestamp / 1000, json.loads(r.value)["term"]) for rs in by_topic.values() for r in rs]
    a_last = max(t for t, term in everything if term == first)
    b_first = min(t for t, term in everything if term == second)
    b_last = max(t for t, term in everything if term == second)
    a_again = min(t for t, term in everything if term == third)
    print(f"A's last record {a_last - cut:+.2f} s from the cut, B's first {b_first - cut:+.2f} s; B's last "
          f"{b_last - before_b_stops:+.2f} s from its stop, A's first again {a_again - before_b_stops:+.2f} s")
    assert a_last < b_first and a_last - cut <= SESSION * 2 / 3, (a_last - cut, b_first - cut)
    assert b_last < a_again

    dead = asyncio.run(read_log(kafka, [f"{unique}.scheduler-events.dlq", f"{unique}.job-events.dlq"]))
    stale = [json.loads(r.value) for r in dead if json.loads(r.value)["reason_code"] == "stale_publisher"]
    assert not stale, stale[:3]
