"""The ZooKeeper bridge: what the watches report, as events on Kafka, plus full snapshots.

Watches are one-shot and may be lost or reordered; that is the seed's own failure mode. So the
bridge publishes each change it sees (the diff of a node's children against what it saw last),
and a full `MembershipSnapshot` per group on every (re)connect and every `snapshot_interval`
seconds, from which the limits fold derives whatever the log missed. Only the elected leader
publishes (kazoo's Election recipe), so two bridges do not double every event.

A leader can lose its leadership without knowing it yet: cut off from ZooKeeper, it learns that its session
expired only once it reaches a server again, and a frozen one learns nothing until it runs. So it publishes only
while its session is connected (`Candidacy.acting`), stops the watches of a session at once when it is lost, and
signs every event with its name and a *term*: the transaction id of the write it made to the election node on
being elected, larger for every later leader. The limits fold refuses an event of an older term than one it has
applied (`stale_publisher`), so whatever a former leader still sends cannot stand over its successor's view.

`drop_fraction` discards that share of change events before they are published (never the
snapshots), so tests can show that the snapshot repairs what watches lost.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.common import INT64_MAX, INT64_MIN
from streams.core.groups import JOB_EVENTS, SCHEDULER_EVENTS
from streams.settings import Settings
from streams.zk.election import Candidacy, process_name, session
from streams.zk.layout import Layout, is_group
from streams.zk.publisher import Publisher

log = logging.getLogger(__name__)


def _metrics() -> tuple[Any, Any, Any, Any, Any]:
    """The bridge's counts, in a registry of its own (served by `serve_metrics`, with the process's CPU and memory)."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector

    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    events = Counter("tribunal_bridge_events", "Events published, by topic and type", ["topic", "type"],
                     registry=registry)
    dropped = Counter("tribunal_bridge_dropped", "Watch events dropped on purpose (--drop-watch-events)",
                      registry=registry)
    leading = Gauge("tribunal_bridge_leading", "1 while this bridge is the elected one", registry=registry)
    term = Gauge("tribunal_bridge_term", "The term of this bridge's newest leadership (0: never elected)",
                 registry=registry)
    return registry, events, dropped, leading, term


REGISTRY, EVENTS, DROPPED, LEADING, TERM = _metrics()


def serve_metrics(host: str, port: int) -> None:
    """`/metrics` for Prometheus on `host:port`, from a thread of its own."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=host, registry=REGISTRY)


@dataclass
class GroupView:
    """What the bridge last saw of one group, to turn the next watch into a diff."""

    schedulers: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)
    owners: dict[str, str] = field(default_factory=dict)
    offline: set[str] = field(default_factory=set)


def scheduler_data(scheduler: str, group: str, raw: bytes) -> dict[str, Any]:
    """A registration as the scheduler wrote it in ZooKeeper; a setting that cannot be read is taken at its default,
    with a warning (one scheduler's bad node must neither stop the bridge nor spoil the group's snapshot)."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    return {"type": "SchedulerRegistered", "group": group, "scheduler": scheduler,
            "address": str(data.get("address", "")),
            "fault_tolerance": _setting(data, "fault_tolerance", 1, scheduler),
            "alarm_threshold": _setting(data, "alarm_threshold", 10, scheduler)}


def _setting(data: dict[str, Any], name: str, default: int, scheduler: str) -> int:
    value = data.get(name, default)
    if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return value
    log.warning("scheduler %s registered %s=%r, not an integer: taken as %d", scheduler, name, value, default)
    return default


class Bridge:
    def __init__(self, settings: Settings, layout: Layout, snapshot_interval: float = 30.0,
                 drop_fraction: float = 0.0, session_timeout: float = 6.0, seed: int | None = None) -> None:
        self.settings, self.layout = settings, layout
        self.snapshot_interval, self.drop_fraction = snapshot_interval, drop_fraction
        self.session_timeout = session_timeout
        self.rng = random.Random(seed)
        self.views: dict[str, GroupView] = {}
        self.lock = threading.RLock()
        self.candidacy = Candidacy()
        self.stopping = self.candidacy.stopping
        self.reconnected = threading.Event()
        self.watching: set[str] = set()
        self.generation = 0  # of the watches: those of an earlier leadership or session stop themselves
        self.name = process_name()
        self.term = 0  # the fencing token of the current leadership, on every event published under it
        self.publisher: Publisher | None = None

    # -- publishing ---------------------------------------------------------------------------
    def _publish(self, topic: str, group: str, event: dict[str, Any], droppable: bool = True) -> None:
        if droppable and self.drop_fraction and self.rng.random() < self.drop_fraction:
            DROPPED.inc()
            log.info("dropped (--drop-watch-events): %s", event)
            return
        assert self.publisher is not None
        self.publisher.submit(self.settings.topic(topic), group, {**event, "publisher": self.name, "term": self.term})
        EVENTS.labels(topic, event["type"]).inc()

    def _scheduler_event(self, group: str, kind: str, scheduler: str) -> None:
        self._publish(SCHEDULER_EVENTS, group, {"type": kind, "group": group, "scheduler": scheduler})

    def _job_event(self, group: str, kind: str, job: str, scheduler: str | None = None) -> None:
        event: dict[str, Any] = {"type": kind, "group": group, "job": job}
        if scheduler is not None:
            event["scheduler"] = scheduler
        self._publish(JOB_EVENTS, group, event)

    # -- reading ZooKeeper --------------------------------------------------------------------
    def _read(self, zk: Any, path: str) -> bytes | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = zk.get(path)
            return bytes(data)
        except NoNodeError:
            return None

    def _owner(self, zk: Any, group: str, job: str) -> str | None:
        """The scheduler id an owner node holds; None (never "") when the node is gone or says no id."""
        raw = self._read(zk, self.layout.node(group, "owners", job))
        owner = raw.decode("utf-8", "replace").strip() if raw is not None else None
        if raw is not None and not owner:
            log.warning("%s: the owner node of job %s holds no scheduler id; published as unowned", group, job)
        return owner or None

    def _children(self, zk: Any, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(zk.get_children(path))
        except NoNodeError:
            return []

    def snapshot(self, zk: Any, group: str) -> dict[str, Any]:
        """The group as ZooKeeper holds it now; also what the next watch diffs against."""
        lay = self.layout
        schedulers = {}
        for sid in self._children(zk, lay.dir(group, "schedulers")):
            raw = self._read(zk, lay.node(group, "schedulers", sid))
            if raw is not None:
                schedulers[sid] = scheduler_data(sid, group, raw)
        owners = {}
        for job in self._children(zk, lay.dir(group, "owners")):
            owner = self._owner(zk, group, job)
            if owner is not None:
                owners[job] = owner
        jobs = set(self._children(zk, lay.dir(group, "jobs")))
        offline = set(self._children(zk, lay.dir(group, "offline")))
        with self.lock:
            self.views[group] = GroupView(schedulers, jobs, {j: o for j, o in owners.items() if j in jobs}, offline)
        return {"type": "MembershipSnapshot", "group": group, "schedulers": [schedulers[s] for s in sorted(schedulers)],
                "jobs": {job: owners.get(job) for job in sorted(jobs)}, "offline": sorted(offline)}

    def publish_snapshots(self, zk: Any) -> None:
        for group in self._children(zk, self.layout.root):
            if is_group(group):
                self._publish(SCHEDULER_EVENTS, group, self.snapshot(zk, group), droppable=False)

    # -- watches --------------------------------------------------------------------------------
    def _watch_groups(self, zk: Any, generation: int) -> None:
        def on_groups(children: list[str]) -> bool:
            if generation != self.generation or self.stopping.is_set():
                return False
            for group in sorted(children):
                if is_group(group) and group not in self.watching:
                    self.watching.add(group)
                    self.layout.ensure(zk, group)
                    self._watch_group(zk, group, generation)
            return True

        zk.ChildrenWatch(self.layout.root, on_groups)

    def _watch_group(self, zk: Any, group: str, generation: int) -> None:
        """Four children watches; each turns a change into events by diffing against the group's view."""
        lay = self.layout

        def watch(kind: str, handle: Callable[[GroupView, list[str], list[str]], None],
                  known: Callable[[GroupView], Iterable[str]]) -> None:
            def on_change(children: list[str]) -> bool:
                if generation != self.generation or self.stopping.is_set():
                    return False  # an earlier leadership or session: stop watching
                with self.lock:
                    view = self.views.setdefault(group, GroupView())
                    now, before = set(children), set(known(view))
                    handle(view, sorted(before - now), sorted(now - before))
                return True

            zk.ChildrenWatch(lay.dir(group, kind), on_change)

        def schedulers(view: GroupView, gone: list[str], new: list[str]) -> None:
            for sid in gone:
                del view.schedulers[sid]
                self._scheduler_event(group, "SchedulerLost", sid)
            for sid in new:
                raw = self._read(zk, lay.node(group, "schedulers", sid))
                if raw is not None:  # None: gone again already
                    view.schedulers[sid] = scheduler_data(sid, group, raw)
                    self._publish(SCHEDULER_EVENTS, group, view.schedulers[sid])

        def flags(names: Callable[[GroupView], set[str]], removed: str, added: str,
                  publish: Callable[[str, str, str], None]) -> Callable[[GroupView, list[str], list[str]], None]:
            """A set-valued part of the view (jobs, the offline list): one event per name gone or new."""
            def handle(view: GroupView, gone: list[str], new: list[str]) -> None:
                for name in gone:
                    names(view).discard(name)
                    publish(group, removed, name)
                for name in new:
                    names(view).add(name)
                    publish(group, added, name)
            return handle

        def owners(view: GroupView, gone: list[str], new: list[str]) -> None:
            for job in gone:
                self._job_event(group, "JobReleased", job, view.owners.pop(job))
            for job in new:
                owner = self._owner(zk, group, job)
                if owner is not None:
                    view.owners[job] = owner
                    self._job_event(group, "JobAcquired", job, owner)

        with self.lock:
            self._publish(SCHEDULER_EVENTS, group, self.snapshot(zk, group), droppable=False)
        watch("schedulers", schedulers, lambda v: v.schedulers)
        watch("jobs", flags(lambda v: v.jobs, "JobDeleted", "JobCreated", self._job_event), lambda v: v.jobs)
        watch("owners", owners, lambda v: v.owners)
        watch("offline", flags(lambda v: v.offline, "SchedulerOnlineRequested", "SchedulerOfflineRequested",
                               self._scheduler_event), lambda v: v.offline)

    # -- leadership -------------------------------------------------------------------------------
    def _lead(self, zk: Any) -> None:
        """Runs while this bridge is the leader: watch, and snapshot on reconnect and on the interval."""
        stat = zk.set(self.layout.election, self.name.encode())  # its transaction id: this leadership's term
        with self.lock:
            self.generation += 1
            self.watching.clear()
            generation, self.term = self.generation, stat.mzxid
        log.info("elected: publishing ZooKeeper's view of %s (term %d)", self.layout.root, self.term)
        LEADING.set(1)
        TERM.set(self.term)
        try:
            self._watch_groups(zk, generation)
            self.publish_snapshots(zk)
            while self.candidacy.holding():
                if self.reconnected.wait(self.snapshot_interval):
                    self.reconnected.clear()
                    log.info("reconnected to ZooKeeper: publishing snapshots")
                if self.candidacy.acting():  # not while suspended: what it would read is not to be had
                    self.publish_snapshots(zk)
        finally:
            LEADING.set(0)
        with self.lock:
            self.generation += 1  # the watches of this leadership stop at their next call

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        self.candidacy.on_state(state)
        if state == KazooState.LOST:
            with self.lock:  # now, before kazoo reconnects: the lost session's watches would fire on its view
                self.generation += 1
            log.warning("ZooKeeper session lost: stepping down until a new session is elected")
        elif state == KazooState.CONNECTED:
            self.reconnected.set()

    async def run(self) -> None:
        async with Publisher(self.settings.kafka_bootstrap) as publisher:
            self.publisher = publisher
            async with session(self.settings.zookeeper_hosts, self.session_timeout, self._on_state) as zk:
                try:
                    await self.candidacy.stand(zk, self.layout.election, lambda: self._lead(zk))
                finally:
                    self.stopping.set()

    def stop(self) -> None:
        self.candidacy.stop()
        self.reconnected.set()
