"""A scheduler (seed 001) cut off by a real partition (issue 48): scheduler A in a network namespace of its own, its
link to ZooKeeper and Kafka cut (`tests.netns`), B and the bridge on the host.

The bound it proves: a cut-off scheduler stops its jobs within two thirds of its session timeout of its last
answer from ZooKeeper (kazoo suspends the session then), before the server can expire its owner nodes and let B
take the jobs; no job ever runs on two schedulers at once (judged from their own run logs); B takes A's jobs once
A's registration is gone, the rejection limit every scheduler sees then is the one of the membership the log
holds (N = 1 + K // max(S - n, 1) for S = 1), and healed, A registers again and takes jobs only as offered.

Before the fix A, its session only suspended, went on running its jobs while B ran them too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Stack, env_of
from tests.groups.test_groups_live import Group, assert_no_job_ran_twice_at_once, latest, with_worker
from tests.helpers import Service, tribunal
from tests.netns import Namespace, Network

JOBS = 8
SESSION = 4.0


class CutGroup(Group):
    space: Namespace

    def start(self, name: str, *args: str) -> Service:
        service = Service(self.env, self.tmp / f"{name}.log", *args, wrap=self.space.wrap([]) if name == "A" else [])
        service.start()
        self.services[name] = service
        return service


@pytest.fixture
def group(net_stack: Stack, network: Network, unique: str, tmp_path: Path) -> Iterator[CutGroup]:
    g = with_worker(CutGroup, env_of(net_stack.bootstrap, unique, tmp_path), tmp_path, net_stack.zookeeper, unique)
    g.space = network.namespace()
    try:
        yield g
    finally:
        g.space.heal()
        g.close()


def test_a_cut_off_scheduler_stops_its_jobs_before_its_session_expires_and_none_runs_twice(
        group: CutGroup, net_stack: Stack, unique: str) -> None:
    group.bridge()
    for sid in "AB":
        group.scheduler(sid)
    # Jobs are offered to the members the fold knows: made before it knows A (the bridge's watch, then the worker),
    # all would be offered to B, and none ever to A (a CI run saw it).
    group.wait("a limit for each scheduler in the log", lambda: {"g/A", "g/B"} <= latest(
        net_stack.bootstrap, f"{unique}.rejection-limits").keys())
    group.create_jobs(JOBS)
    group.wait("every job owned, some by each", lambda: len(group.owners()) == JOBS
               and set(group.owners().values()) == {"A", "B"})
    theirs = sorted(j for j, s in group.owners().items() if s == "A")
    gone = {"at": 0.0}

    def registration_gone(event: object) -> None:
        gone["at"] = time.time()

    assert group.zk.exists(group.path("schedulers", "A"), watch=registration_gone) is not None
    group.space.cut()
    cut = time.time()
    group.wait("B owns every job", lambda: len(group.owners()) == JOBS and set(group.owners().values()) == {"B"},
               timeout=60)
    time.sleep(2)
    group.space.heal()
    group.wait("A registered again", lambda: group.zk.exists(group.path("schedulers", "A")) is not None, timeout=60)
    time.sleep(3)
    runs = group.runs()
    stops = {job: max(e for _, e, sid in runs[job] if sid == "A" and e > cut - 1) for job in theirs}
    last_stop = max(stops.values())
    print(f"A's jobs stopped {last_stop - cut:.2f} s after the cut; its registration gone {gone['at'] - cut:.2f} s")
    assert gone["at"] > last_stop, (gone, stops)  # stopped before the server expired its session
    assert last_stop - cut <= SESSION, stops
    assert_no_job_ran_twice_at_once(runs)

    def limits_after() -> bool:  # the membership the log holds: B alone (A had gone) or both again
        limits = latest(net_stack.bootstrap, f"{unique}.rejection-limits")
        health = latest(net_stack.bootstrap, f"{unique}.group-health").get("g", {})
        return health.get("K") == JOBS and limits.get("g/B", {}).get("N") == 1 + JOBS // max(health["S"] - 1, 1)

    group.wait("the limits of the membership the log holds", limits_after, timeout=60)
    assert "ZooKeeper connection suspended: stopped its" in group.services["A"].log(), group.services["A"].log()[-3000:]
    shown = json.loads(tribunal("groups", "state", "--group", "g", env=group.env).stdout)
    assert shown["K"] == JOBS, shown
