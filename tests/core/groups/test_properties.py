"""SPEC §4's invariants as hypothesis properties: any interleaving, any lost watch, one snapshot repairs all."""

from __future__ import annotations

import heapq
import json
import random
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import buckets, groups
from streams.core.groups.codec import dump_bucket, listed, touched
from streams.core.groups.emission import limit_stream
from tests.core.groups.group_log import GroupLog, of, reloaded

IDS = ["A", "B", "C", "D", "E"]


class World:
    """What ZooKeeper really holds, and the events its watches would report, in true order."""

    def __init__(self) -> None:
        self.members: dict[str, dict[str, Any]] = {}
        self.owners: dict[str, str | None] = {}
        self.offline: set[str] = set()
        self.events: list[dict[str, Any]] = []

    def step(self, op: tuple[str, int, int]) -> None:
        kind, a, b = op
        sid, job = IDS[a % len(IDS)], f"j{b:02d}"
        if kind == "register" and sid not in self.members:
            self.members[sid] = {"scheduler": sid, "address": f"{sid}:1", "fault_tolerance": 1 + b % 3,
                                 "alarm_threshold": b % 7}
            self.events.append({"type": "SchedulerRegistered", **self.members[sid]})
        elif kind == "lose" and sid in self.members:
            del self.members[sid]
            for j, owner in sorted(self.owners.items()):  # its owner nodes vanish with the session...
                if owner == sid:
                    self.owners[j] = None
                    self.events.append({"type": "JobReleased", "job": j, "scheduler": sid})
            self.events.append({"type": "SchedulerLost", "scheduler": sid})  # ...reported in either order
        elif kind == "create" and job not in self.owners:
            self.owners[job] = None
            self.events.append({"type": "JobCreated", "job": job})
        elif kind == "delete" and job in self.owners:
            owner = self.owners.pop(job)
            if owner is not None:
                self.events.append({"type": "JobReleased", "job": job, "scheduler": owner})
            self.events.append({"type": "JobDeleted", "job": job})
        elif kind == "acquire" and job in self.owners and self.owners[job] is None and sid in self.members:
            self.owners[job] = sid
            self.events.append({"type": "JobAcquired", "job": job, "scheduler": sid})
        elif kind == "release" and self.owners.get(job) is not None:
            owner = self.owners[job]
            self.owners[job] = None
            self.events.append({"type": "JobReleased", "job": job, "scheduler": owner})
        elif kind == "offline" and sid not in self.offline:
            self.offline.add(sid)
            self.events.append({"type": "SchedulerOfflineRequested", "scheduler": sid})
        elif kind == "online" and sid in self.offline:
            self.offline.discard(sid)
            self.events.append({"type": "SchedulerOnlineRequested", "scheduler": sid})

    def snapshot(self) -> dict[str, Any]:
        members = [{"type": "SchedulerRegistered", "group": "g", **m} for _, m in sorted(self.members.items())]
        return {"type": "MembershipSnapshot", "schedulers": members,
                "jobs": dict(sorted(self.owners.items())), "offline": sorted(self.offline)}


def world_of(script: list[tuple[str, int, int]]) -> World:
    world = World()
    for op in script:
        world.step(op)
    return world


ops = st.lists(st.tuples(st.sampled_from(["register", "register", "lose", "create", "create", "create", "delete",
                                          "acquire", "acquire", "release", "offline", "online"]),
                         st.integers(0, 4), st.integers(0, 24)), max_size=80)


def deliver(log: GroupLog, event: dict[str, Any]) -> list[Any]:
    fields = {k: v for k, v in event.items() if k != "type"}
    return log.send(event["type"], **fields)


def take_offers(log: GroupLog) -> None:
    """Schedulers acquire what they are offered, as the client does, until nothing is offered."""
    for _ in range(100):
        offered = groups.offers(log.state)
        if not offered:
            return
        for job, sid in sorted(offered.items()):
            log.acquire(job, sid)
    raise AssertionError("offers never settle")


def assert_consistent(state: groups.GroupState) -> None:
    """No job has two owners: the held sets partition the owned jobs exactly as `owners` says."""
    pairs = [(job, owner) for owner, jobs in state.held.items() for job in jobs]
    assert len(pairs) == len({job for job, _ in pairs})
    assert sorted(pairs) == sorted((j, o) for j, o in state.owners.items() if o is not None)
    assert set(state.orphans) == {j for j, o in state.owners.items() if o is None or o not in state.members}
    assert reloaded(state) == state


def inline(state: groups.GroupState, group: str = "g") -> dict[str, Any]:
    """The group's entry as tribunal wrote it before jobs and schedulers had tables of their own: all in it."""
    entry = {k: v for k, v in groups.dump(state).items() if k not in ("jobs", "schedulers")}
    seqs = {limit_stream(group, sid): seq for sid, seq in state.limit_seqs.items()}
    return {**entry, "owners": dict(sorted(state.owners.items())),
            "members": {sid: [m.address, m.n, m.M] for sid, m in sorted(state.members.items())},
            "figures": {sid: list(f) for sid, f in sorted(state.figures.items())},
            "seqs": dict(sorted({**entry["seqs"], **seqs}.items()))}


@given(ops, st.data())
def test_one_snapshot_repairs_any_interleaving_and_any_lost_watch(script: list[tuple[str, int, int]],
                                                                  data: st.DataObject) -> None:
    world = world_of(script)
    events = list(world.events)
    # Lose some watch events and reorder neighbours, as ZooKeeper watches may.
    kept = [e for e in events if not data.draw(st.booleans(), label="drop")]
    for i in range(len(kept) - 1):
        if data.draw(st.integers(0, 3), label="swap") == 0:
            kept[i], kept[i + 1] = kept[i + 1], kept[i]
    log = GroupLog()
    for event in kept:
        deliver(log, event)
        assert_consistent(log.state)
    deliver(log, world.snapshot())
    state = log.state
    assert_consistent(state)
    assert dict(state.owners) == world.owners
    assert sorted(state.members) == sorted(world.members)
    assert set(state.offline) == world.offline
    take_offers(log)
    assert_consistent(log.state)
    if log.state.sum_N() >= log.state.K:
        assert not log.state.orphans, "a job is unowned though the online schedulers have room for all"


@given(ops)
def test_x_never_exceeds_n_through_an_acquisition_the_core_allowed(script: list[tuple[str, int, int]]) -> None:
    log = GroupLog()
    for event in world_of(script).events:
        allowed = None
        if event["type"] == "JobAcquired" and event["scheduler"] in log.state.members:
            f = log.state.figures_of(event["scheduler"])
            allowed = not f[5] and not f[7]  # not refusing, not offline
        outputs = deliver(log, event)
        if allowed:
            sid = event["scheduler"]
            assert log.state.X(sid) <= log.state.N(sid)
        [health] = of(outputs, groups.GROUP_HEALTH)
        assert health["capacity_ok"] == (health["sum_N"] >= health["K"])


@given(ops)
def test_emitted_figures_are_always_the_current_ones(script: list[tuple[str, int, int]]) -> None:
    """Emitting only on change loses nothing: the last record per scheduler equals its figures now."""
    log = GroupLog()
    for event in world_of(script).events:
        deliver(log, event)
    last: dict[str, dict[str, Any]] = {}
    for record in of(log.emitted, groups.REJECTION_LIMITS):
        last[record["scheduler"]] = record
    for sid in log.state.members:
        f = log.state.figures_of(sid)
        r = last[sid]
        assert (r["live"], r["n"], r["N"], r["X"], r["M"], r["refuse"], r["alarm"], r["offline"], r["drained"]) == f
    for sid, r in last.items():
        if sid not in log.state.members:
            assert r["live"] is False


def offers_by_full_scan(state: groups.GroupState) -> dict[str, str]:
    """The definition, spelled out: every online scheduler with room in a heap by (X, id)."""
    heap = [(state.X(sid), sid, state.N(sid)) for sid in state.members
            if sid not in state.offline and state.X(sid) < state.N(sid)]
    heapq.heapify(heap)
    out = {}
    for job in sorted(state.orphans):
        if not heap:
            break
        x, sid, big_n = heapq.heappop(heap)
        out[job] = sid
        if x + 1 < big_n:
            heapq.heappush(heap, (x + 1, sid, big_n))
    return out


@given(ops)
def test_indexed_offers_equal_the_full_scan(script: list[tuple[str, int, int]]) -> None:
    log = GroupLog()
    for event in world_of(script).events:
        deliver(log, event)
        assert groups.offers(log.state) == offers_by_full_scan(log.state)


class Tables:
    """A group's entries in the worker's two tables, written as the worker writes them: the buckets a record
    touched, and the group's entry."""

    def __init__(self) -> None:
        self.buckets: dict[str, Any] = {}
        self.entry: dict[str, Any] | None = None

    def write(self, before: groups.GroupState, after: groups.GroupState) -> None:
        for name in touched(before, after):
            self.buckets[name] = dump_bucket(after, name)
        self.entry = groups.dump(after)

    def read(self) -> groups.GroupState:
        """The state a worker reads back (as JSON, the tables' encoding)."""
        stored = {name: self.buckets.get(name) for name in listed(self.entry)}
        return groups.load(*json.loads(json.dumps([self.entry, stored])))


@given(ops, st.integers(0, 80))
def test_the_buckets_a_record_touched_are_all_it_changed(script: list[tuple[str, int, int]], split: int) -> None:
    """The worker rewrites only the buckets a record touched: kept that way, what the tables hold is the state,
    also across a worker that reads an entry holding jobs and schedulers inline (written by an earlier version)
    at `split`, and writes every bucket after its next record. The outputs go on as if nothing was reloaded."""
    log, plain, tables = GroupLog(), GroupLog(), Tables()
    with mock.patch.object(buckets, "PER_BUCKET", 2):  # a handful of jobs and schedulers in several buckets
        for i, event in enumerate(world_of(script).events):
            if i == split:
                log.state = groups.load(json.loads(json.dumps(inline(log.state))))
                tables = Tables()
            before = log.state
            assert [e.value_bytes() for e in deliver(log, event)] == [e.value_bytes() for e in deliver(plain, event)]
            tables.write(before, log.state)
            assert tables.read() == log.state
    assert len(log.state.owners) < 5 or log.state.owners.of.bits > 0  # type: ignore[attr-defined]


@settings(max_examples=max(1, settings().max_examples // 15))  # each example a whole group's life: about 2 s
@given(st.integers(100, 400), st.integers(0, 2**32 - 1))
def test_a_group_growing_and_shrinking_is_rebucketed_and_its_tables_stay_whole(jobs: int, seed: int) -> None:
    """Buckets double as a group grows past 32 names a bucket and halve as it shrinks (`buckets.Hashed`); each
    time every bucket of both sizes is written, and what the tables hold stays the state."""
    rng = random.Random(seed)
    log, tables = GroupLog(), Tables()
    names = [f"job-{rng.getrandbits(40):x}" for _ in range(jobs)]
    events = [("SchedulerRegistered", {"scheduler": f"s{i}", "address": f"s{i}:1", "fault_tolerance": 1,
                                       "alarm_threshold": jobs}) for i in range(rng.randrange(40, 120))]
    events += [("JobCreated", {"job": job}) for job in names]
    events += [("JobDeleted", {"job": job}) for job in rng.sample(names, len(names))]
    events += [("SchedulerLost", {"scheduler": f"s{i}"}) for i in range(len(events) - 2 * jobs)]
    sizes = set()
    for kind, fields in events:
        before = log.state
        log.send(kind, **fields)
        tables.write(before, log.state)
        sizes.add((log.state.owners.of.bits, log.state.members.of.bits))  # type: ignore[attr-defined]
        assert tables.read() == log.state
    assert {bits for bits, _ in sizes} >= {0, 1, 2}, sizes
    assert {bits for _, bits in sizes} >= {0, 1}, sizes
    assert log.state.owners.of.bits == 0  # type: ignore[attr-defined]


@given(ops, st.data())
def test_the_fence_applies_exactly_the_events_no_newer_term_preceded(script: list[tuple[str, int, int]],
                                                                     data: st.DataObject) -> None:
    """SPEC §4's fence: folding events with publisher terms (and some without) is folding, term-free, exactly those
    whose term is not older than the newest applied before them; every other one is dead-lettered
    `stale_publisher`; the snapshot of the newest term still repairs the rest."""
    world = world_of(script)
    fenced, plain = GroupLog(), GroupLog()
    newest = 0
    for event in world.events:
        term = data.draw(st.one_of(st.none(), st.integers(1, 6)), label="term")
        out = deliver(fenced, {**event, **({} if term is None else {"publisher": f"p{term}", "term": term})})
        if term is not None and term < newest:
            assert [json.loads(e.value_bytes())["reason_code"] for e in out] == ["stale_publisher"]
            continue
        newest = max(newest, term or 0)
        deliver(plain, event)
        a, b = fenced.state, plain.state
        assert (dict(a.owners), dict(a.members), a.offline, dict(a.figures), dict(a.offers)) == \
            (dict(b.owners), dict(b.members), b.offline, dict(b.figures), dict(b.offers))
    deliver(fenced, {**world.snapshot(), "publisher": "last", "term": newest + 1})
    assert dict(fenced.state.owners) == world.owners and sorted(fenced.state.members) == sorted(world.members)
