"""`tribunal pools actuate`: a reconcile loop that makes a target run what the decider decided, and says what runs.

Desired comes from the decisions (a `DeciderClient` with no consumer group: every replica reads every decision,
and starts from the compacted `pool-instances`, so neither offsets nor replay are needed); observed is the
target's own answer. Each pass (at once when a decision moves the desired state, else every `interval`)
compares them and applies the difference to the target, always the latest desired state: a change that fails
is retried with backoff (0.5 s doubling to 30 s) as whatever the desired state is by then, so an older seq is
never applied after a newer one.

What runs can differ from what the decider believes: a copy crashed, someone scaled by hand. The actuator puts
it back (desired wins, as a ReplicaSet's controller does) and counts the drift. A difference it cannot put right
within `report_after` seconds (a target that keeps failing, a copy that keeps dying) is written to the decider as
`InstancesObserved`, so that it frees or reassigns what is not running, once per difference.

At least once, end to end: a change names absolute counts, so applying one twice is harmless, and a crash at
any step leaves at worst a change applied and not yet recorded as such (applied again after the restart), or
a difference not yet reported (found again). Two actuators of one pool do not fight: they stand in a ZooKeeper
election (as the ticker's replicas do) and only the elected one applies; the others keep their desired state
current and take over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from schemas.decisions import Actuation
from streams.decider.client import DeciderClient, Desired
from streams.decider.metrics import ActuatorMetrics
from streams.decider.targets import ActuationFailed, Change, Target, backoff, instrument
from streams.settings import Settings
from streams.topics import ACTUATIONS
from streams.zk.election import process_name

log = logging.getLogger(__name__)

BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0


class Pass(NamedTuple):
    """What one reconcile pass found and did (written as an `Actuation`)."""

    desired: Desired
    observed: dict[str, int]
    drift: dict[str, int]
    applied: Mapping[str, int] = {}
    failed: Mapping[str, str] = {}
    reported: Mapping[str, int] = {}


class Told(NamedTuple):
    """What the decider was told runs of an app, and the count it had decided for the app then."""

    runs: int
    decided: int


@dataclass
class Actuator:
    settings: Settings
    pool: str
    target: Target
    dry_run: bool = False
    interval: float = 1.0  # seconds between observations when no decision arrives
    report_after: float = 10.0  # seconds a difference may last before the decider is told what runs
    election: bool = True
    root: str = "/tribunal"  # the ZooKeeper root its election lives under
    session_timeout: float = 6.0  # how long a dead elected actuator holds the election (its ZooKeeper session)
    metrics: ActuatorMetrics = field(default_factory=ActuatorMetrics)
    journal: Callable[[Actuation], Awaitable[None]] | None = None  # where passes are written (None: `actuations`)
    applied: dict[str, int] = field(default_factory=dict)  # app -> the count last applied (or seen applied)
    applied_seq: int = 0  # the newest decision whose desired state the target was seen to run
    failures: int = 0  # consecutive failed passes
    differing: dict[str, float] = field(default_factory=dict)  # app -> since when (monotonic) it runs other than
    # decided: from the first pass that saw it so until one sees it run as decided (an apply that succeeds, a copy
    # started again, does not end it: a copy that dies at once would never be reported)
    failing: dict[str, str] = field(default_factory=dict)  # app -> why the target last failed to put it right
    reported: dict[str, Told] = field(default_factory=dict)  # app -> what the decider was told, until it runs right
    trouble: str = ""  # the last error a pass raised (logged in full once, not at every retry)
    stopping: threading.Event = field(default_factory=threading.Event)
    leading: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.client = DeciderClient(self.settings, self.pool, group_id=None)
        self.identity = process_name()
        instrument(self.target, self.metrics)

    # -- one pass ----------------------------------------------------------------------------------
    async def reconcile(self) -> float:
        """Bring the target to the desired state once; the seconds to wait before the next pass."""
        desired = self.client.desired(self.pool)
        self.metrics.behind.labels(self.pool).set(max(0, desired.seq - self.applied_seq))
        if desired.seq == 0:
            return self.interval  # nothing decided for this pool yet
        observed = dict(await self.target.observe(self.pool, sorted(desired.instances)))
        seeing = {app: observed.get(app, self.applied.get(app, -1)) for app in desired.instances}
        drift = {app: n for app, n in seeing.items()
                 if app in observed and app not in self.failing and self.applied.get(app, n) != n}
        for app, n in sorted(drift.items()):
            log.warning("%s/%s runs %d, %d applied: put back", self.pool, app, n, self.applied[app])
            self.metrics.drift.labels(self.pool).inc()
            self.applied[app] = n
        for app in self.failing.keys() & observed.keys():
            self.applied[app] = observed[app]  # what runs while it cannot be put right: not drift
        # an app the target failed is not right until the target says so (it may run copies it does not count)
        wrong = {app: n for app, n in desired.instances.items() if seeing[app] != n or app in self.failing}
        recovered = await self._settled([app for app in desired.instances if app not in wrong], desired)
        pass_ = Pass(desired, observed, drift, reported=recovered)
        if not wrong:
            if drift or recovered:  # changed by hand to what the decisions want, or a recovery: worth the record
                await self._record(pass_, seeing)
            self._reconciled(desired)
            return self.interval
        if self.dry_run:
            if desired.seq > self.applied_seq:
                log.info("dry run: would set %s (decision %d)", _counts(wrong), desired.seq)
                self.applied_seq = desired.seq
                await self._record(pass_._replace(applied=wrong), seeing, dry_run=True)
            return self.interval
        self.metrics.lag.labels(self.pool).set(max(0.0, time.time() - desired.at / 1000) if desired.at else 0.0)
        if self.election and not self.leading.is_set():  # no longer (its session suspended while it observed)
            return self.interval
        failed, retry_after = await self._apply(Change(self.pool, desired.seq, wrong, desired.instances))
        done = {app: n for app, n in wrong.items() if app not in failed}
        self.applied.update(done)
        labels = (self.pool, self.target.name)
        self.metrics.applied.labels(*labels).inc(len(done))
        news = self._failing(failed, desired.seq)
        differing = {app: n for app, n in seeing.items() if app in wrong and n != desired.instances[app]
                     and (app in observed or app in failed) and n >= 0}
        reported = await self._report_lasting(differing, desired)
        if done or drift or reported or recovered or news:
            await self._record(pass_._replace(applied=done, failed=failed, reported={**recovered, **reported}),
                               {**seeing, **done})
        if failed:
            # a target that backs off on its own is asked again when it says, and counted once per new failure
            self.metrics.failed.labels(*labels).inc(len(failed) if retry_after is None else len(news))
            self.failures += 1
            wait = backoff(self.failures, BACKOFF_FIRST, BACKOFF_MAX) if retry_after is None else max(
                0.05, min(self.interval, retry_after))
            return min(wait, self._report_due())
        self._reconciled(desired)
        return min(self.interval, self._report_due())

    async def _apply(self, change: Change) -> tuple[dict[str, str], float | None]:
        """The change made: the apps the target did not set (and why), and when it says to try again."""
        try:
            await self.target.apply(change)
        except ActuationFailed as e:
            return e.failed, e.retry_after
        except Exception as e:  # a target of the user's failing its own way: every app of the change failed
            why = f"{type(e).__name__}: {e}"
            if why != self.trouble:
                log.exception("the %s target raised applying decision %d", self.target.name, change.seq)
                self.trouble = why
            return dict.fromkeys(change.instances, why), None
        return {}, None

    def _failing(self, failed: Mapping[str, str], seq: int) -> dict[str, str]:
        """Keep `failing` as this pass left it, logging each app's failure once while it stays the same; the
        failures that are new or say something new."""
        news = {app: why for app, why in failed.items() if self.failing.get(app) != why}
        if news:
            log.warning("%s target failed for %s (decision %d): %s", self.target.name, sorted(news), seq,
                        "; ".join(f"{app}: {why}" for app, why in sorted(news.items())))
        if mended := sorted(self.failing.keys() - failed.keys()):
            log.info("%s target set %s (decision %d) after failing", self.target.name, mended, seq)
        for app in mended:
            self.metrics.failing.labels(self.pool, app).set(0)
        for app in failed:
            self.metrics.failing.labels(self.pool, app).set(1)
        self.failing = dict(failed)
        return news

    async def _settled(self, right: list[str], desired: Desired) -> dict[str, int]:
        """The apps that run as decided (`right`) no longer differ. One the decider was told otherwise of, whose
        decided count has not changed since (the decider has not acted on the report yet), is reported again:
        the copies run again (a fixed release) and the decider should not take them away. The counts reported."""
        for app in [a for a in self.differing if a not in desired.instances]:
            del self.differing[app]
        recovered = {}
        for app in right:
            self.applied[app] = desired.instances[app]
            self.differing.pop(app, None)
            told = self.reported.pop(app, None)
            if told is not None and told.decided == desired.instances[app]:
                recovered[app] = desired.instances[app]
        if recovered:
            log.warning("%s: %s run as decided again before the decider acted on the report: telling it",
                        self.pool, _counts(recovered))
            await self.client.observe_all(recovered, self.pool)
            self.metrics.recovered.labels(self.pool).inc(len(recovered))
        return recovered

    def _report_due(self) -> float:
        """Seconds until a difference not yet reported has lasted `report_after` (a pass is due then)."""
        now = time.monotonic()
        due = [since + self.report_after - now for app, since in self.differing.items() if app not in self.reported]
        return max(0.05, min(due)) if due else float("inf")

    async def _record(self, done: Pass, running: Mapping[str, int], dry_run: bool = False) -> None:
        """The pass, on `actuations`: what ran, beside what was decided (not waited for: a record a crash loses
        leaves the audit trail a pass short, never the target wrong)."""
        record = Actuation(pool=self.pool, seq=done.desired.seq, target=self.target.name, actuator=self.identity,
                           desired=dict(done.desired.instances), observed=done.observed, applied=dict(done.applied),
                           failed=dict(done.failed), drift=dict(done.drift), reported=dict(done.reported),
                           running={app: n for app, n in sorted(running.items()) if n >= 0}, dry_run=dry_run)
        if self.journal is not None:
            await self.journal(record)
        else:
            await self.client.write_soon(ACTUATIONS, self.pool, record.model_dump_json().encode())

    def _reconciled(self, desired: Desired) -> None:
        if desired.seq > self.applied_seq and desired.at:
            self.metrics.apply_seconds.labels(self.pool).observe(max(0.0, time.time() - desired.at / 1000))
        self.applied_seq = max(self.applied_seq, desired.seq)
        self.failures = 0
        self.trouble = ""
        self.metrics.lag.labels(self.pool).set(0.0)
        self.metrics.behind.labels(self.pool).set(0)

    async def _report_lasting(self, seen: Mapping[str, int], desired: Desired) -> dict[str, int]:
        """Tell the decider what runs of the apps (`seen`) that have differed from its instances for
        `report_after` seconds, once per difference (again if what runs changes while it lasts)."""
        now = time.monotonic()
        lasting = {}
        for app, n in sorted(seen.items()):
            since = self.differing.setdefault(app, now)
            told = self.reported.get(app)
            if now - since >= self.report_after and (told is None or told.runs != n):
                lasting[app] = n
        if lasting:
            log.warning("reporting to the decider what runs in %s: %s", self.pool, _counts(lasting))
            await self.client.observe_all(lasting, self.pool)
            self.reported.update({app: Told(n, desired.instances[app]) for app, n in lasting.items()})
            self.metrics.reported.labels(self.pool).inc(len(lasting))
        return lasting

    # -- the loops ---------------------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        changed = self.client.changed
        while not self.stopping.is_set():
            wait = self.interval
            changed.clear()  # a standby too: else a decision it saw would wake it at once, forever
            if self.leading.is_set():
                try:
                    wait = await self.reconcile()
                except Exception as e:  # a target that cannot observe, say: retried, never the end of the loop
                    if f"{type(e).__name__}: {e}" != self.trouble:
                        log.exception("reconciling pool %s failed (retried, logged again if it fails otherwise)",
                                      self.pool)
                        self.trouble = f"{type(e).__name__}: {e}"
                    self.failures += 1
                    wait = backoff(self.failures, BACKOFF_FIRST, BACKOFF_MAX)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), wait)

    def _lead(self) -> None:
        log.info("elected: actuating pool %s through the %s target", self.pool, self.target.name)
        self.metrics.leading.labels(self.pool).set(1)
        self.candidacy.follow(self.leading, f"actuating pool {self.pool}",  # a pass at once each time it may act
                              lambda: self.loop.call_soon_threadsafe(self.client.changed.set))
        self.metrics.leading.labels(self.pool).set(0)
        log.info("no longer actuating pool %s", self.pool)

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Follow, stand and reconcile until `stop()`; `ready` is set once the desired state is read."""
        from streams.zk.election import Candidacy, session
        from streams.zk.layout import Layout

        self.loop = asyncio.get_running_loop()
        self.candidacy = Candidacy()
        self.candidacy.stopping = self.stopping
        async with self.client:
            followed = asyncio.Event()
            tasks = [asyncio.create_task(self.client.run(followed))]
            await _first(followed.wait(), tasks[0])
            if ready is not None:
                ready.set()
            tasks.append(asyncio.create_task(self._reconcile_loop()))
            try:
                if not self.election:
                    self.leading.set()
                    self.metrics.leading.labels(self.pool).set(1)
                    await _first(asyncio.to_thread(self.stopping.wait), *tasks)
                    return
                async with session(self.settings.zookeeper_hosts, self.session_timeout, self.candidacy.on_state) as zk:
                    tasks.append(asyncio.create_task(
                        self.candidacy.stand(zk, Layout(self.root).actuator_election(self.pool), self._lead)))
                    await _first(asyncio.to_thread(self.stopping.wait), *tasks)
            finally:
                self.stop()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await self.target.close()

    def stop(self) -> None:
        self.stopping.set()
        candidacy = getattr(self, "candidacy", None)
        if candidacy is not None:
            candidacy.stop()


async def _first(*waits: Any) -> None:
    """Wait until the first of `waits` ends; a task among them that failed raises its error here."""
    futures = [asyncio.ensure_future(w) for w in waits]
    done, pending = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    for f in pending:
        if f not in waits:
            f.cancel()
    for f in done:
        f.result()


def _counts(instances: Mapping[str, int]) -> str:
    return ", ".join(f"{app}={n}" for app, n in sorted(instances.items()))
