"""A dispatcher namespace's state: its jobs, its workers' caps and counts, and the queues that order them.

Frozen like every fold's state, and built so that a record's cost grows with the log, not the
number, of the jobs pending: the jobs are a map whose newest version is read and changed at a dict's
cost (`versioned`: a command reads a few jobs at random among up to 100,000, where a trie's paths
miss the processor's caches), the workers a persistent hash array mapped trie (`immutables.Map`, in
C), the queues persistent heaps of sorted runs (`heap`), so a record copies O(log n) of them.

Queues (entries that name a job no longer in that status are skipped when they reach the top):
* `waiting`: assigns not yet startable, as (expected_start, first order, worker, run): a run is the
  assign's jobs as (acceptable_start, order, uuid) in start order, moved whole to its worker's
  `ready` when `now` reaches the expected start;
* each worker's `ready`: its startable jobs, by (acceptable_start, order), the start order SPEC §5
  fixes, as run entries (`heap.push_run`);
* `tops`: the top of each worker's `ready` while the worker has room, as (acceptable_start, order, uuid,
  worker): the global merge, so a start looks at the workers that can start, not at every worker
  (an entry that is no longer its worker's top, or whose worker has no room, is dropped when popped);
* `deadlines`: running attempts, by (deadline, order, attempt); an ended attempt's entry is dropped
  when the queue is rebuilt (`deadline_entries` counts them all).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from immutables import Map

from streams.core.admission import NO_COUNTS
from streams.core.dispatch.heap import Heap
from streams.core.frozen import Frozen
from streams.core.versioned import Versioned

DEFAULT_MAX_THREADS = 100  # the seed's `elastic_dispatcher_config` row: threads, max 100


JOB_FIELDS = ("uuid", "external_id", "info", "worker", "expected_start", "acceptable_start", "order", "max_retries",
              "timeout_ms", "attempt", "running", "started_at", "deadline", "assigned_by")


@final
class Job(Frozen):
    """A job. Frozen by convention: a change builds a new one. A plain class, not a named tuple: compiled, it is
    built and read natively (a start builds one and reads most of its fields). Stored as `fields()`, in this
    order (the named tuple's); `assigned_by`, the assign's `principal`, only where there was one, so that a job
    assigned by no one known is stored as before the field existed."""

    __slots__ = ("acceptable_start", "assigned_by", "attempt", "deadline", "expected_start", "external_id", "info",
                 "max_retries", "order", "running", "started_at", "timeout_ms", "uuid", "worker")

    def __init__(self, uuid: str, external_id: str, info: str, worker: str, expected_start: int,
                 acceptable_start: int, order: int, max_retries: int, timeout_ms: int, attempt: int = 0,
                 running: bool = False, started_at: int = 0, deadline: int = 0, assigned_by: str | None = None) -> None:
        self.uuid = uuid
        self.external_id = external_id
        self.info = info
        self.worker = worker
        self.expected_start = expected_start
        self.acceptable_start = acceptable_start
        self.order = order  # the job's place among all jobs assigned in the namespace: ties broken by it
        self.max_retries = max_retries
        self.timeout_ms = timeout_ms
        self.attempt = attempt  # attempts started so far
        self.running = running
        self.started_at = started_at
        self.deadline = deadline
        self.assigned_by = assigned_by  # who assigned it (the command's principal), if anyone known

    def fields(self) -> list[Any]:
        """Every field, in `JOB_FIELDS` order (`assigned_by` only if set): the stored form, which `Job(*fields)`
        reads back."""
        fields = [self.uuid, self.external_id, self.info, self.worker, self.expected_start, self.acceptable_start,
                  self.order, self.max_retries, self.timeout_ms, self.attempt, self.running, self.started_at,
                  self.deadline]
        if self.assigned_by is not None:
            fields.append(self.assigned_by)
        return fields

    def _fields(self) -> tuple[object, ...]:
        return tuple(self.fields())

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in JOB_FIELDS}


def bucket_of(uuid: str) -> str:
    """The bucket a job is stored in: its uuid's first byte (256 buckets)."""
    return uuid[:2]


Jobs = Versioned[Job]  # a namespace's jobs by uuid, in buckets by `bucket_of`: a table entry per bucket
NO_JOBS: Jobs = Versioned(bucket_of)


def job_of(jobs: Jobs, uuid: str) -> Job | None:
    """`jobs.get(uuid)`, calling `bucket_of` natively rather than through the map's bucket function (every `Jobs`
    is bucketed by it: `NO_JOBS` and `codec.load` make them so, and a change keeps it)."""
    return jobs.get_in(bucket_of(uuid), uuid)


@final
class Worker(Frozen):
    """A worker's cap, counts and ready queue. Frozen by convention: a change builds a new one. A plain class, not
    a named tuple: compiled, it is built and read natively (a start builds one)."""

    __slots__ = ("max", "pending", "ready", "running")

    def __init__(self, max: int | None = None, running: int = 0, pending: int = 0, ready: Heap = None) -> None:
        self.max = max  # None: only the namespace's cap holds
        self.running = running
        self.pending = pending
        self.ready = ready

    def has_room(self) -> bool:
        return self.max is None or self.running < self.max

    def with_ready(self, ready: Heap) -> Worker:
        """This worker with another ready queue (the same cap and counts)."""
        return Worker(self.max, self.running, self.pending, ready)

    def _fields(self) -> tuple[object, ...]:
        return (self.max, self.running, self.pending, self.ready)


NO_WORKERS: Map[str, Worker] = Map()
FIELDS = ("offsets", "applied", "seqs", "now", "max", "running", "assigned", "jobs", "workers", "waiting", "deadlines",
          "deadline_entries", "tops")


@final
class DispatchState(Frozen):
    """A namespace's state. Frozen by convention: a change copies it (`copy`, then the copy's fields are set by the
    code that made it, before anyone else sees it). A plain class, not a named tuple: compiled, a copy and its
    fields are native, where a named tuple's `_replace` is a Python call (five a command cost a fifth of it)."""

    __slots__ = (
        "applied",
        "assigned",
        "deadline_entries",
        "deadlines",
        "dispatch", "jobs",
        "max",
        "now",
        "offsets",
        "running",
        "seqs",
        "tops",
        "waiting",
        "workers",
    )

    def __init__(self, offsets: Mapping[str, int] = NO_COUNTS, applied: int = 0, seqs: Mapping[str, int] = NO_COUNTS,
                 now: int = 0, max: int = DEFAULT_MAX_THREADS, running: int = 0, assigned: int = 0,
                 jobs: Jobs = NO_JOBS, workers: Map[str, Worker] = NO_WORKERS, waiting: Heap = None,
                 deadlines: Heap = None, deadline_entries: int = 0, tops: Heap = None) -> None:
        self.offsets = offsets
        self.applied = applied
        self.seqs = seqs
        self.now = now
        self.max = max
        self.running = running
        self.assigned = assigned  # jobs assigned so far: the next job's `order`
        self.jobs = jobs
        self.workers = workers
        self.waiting = waiting
        self.deadlines = deadlines
        self.deadline_entries = deadline_entries  # in `deadlines`, live or stale (rebuilt when too many are stale)
        self.tops = tops

    def copy(self) -> DispatchState:
        """A copy to change (see the class)."""
        return DispatchState(self.offsets, self.applied, self.seqs, self.now, self.max, self.running, self.assigned,
                             self.jobs, self.workers, self.waiting, self.deadlines, self.deadline_entries, self.tops)

    def _replace(self, **changes: Any) -> DispatchState:
        """A copy with `changes` (as a named tuple's): what `admission` and the cold paths use."""
        fields = dict(zip(FIELDS, self._fields(), strict=True))
        unknown = changes.keys() - fields.keys()
        if unknown:
            raise ValueError(f"Got unexpected field names: {sorted(unknown)!r}")
        fields.update(changes)
        return DispatchState(**fields)

    def _fields(self) -> tuple[Any, ...]:
        return (self.offsets, self.applied, self.seqs, self.now, self.max, self.running, self.assigned, self.jobs,
                self.workers, self.waiting, self.deadlines, self.deadline_entries, self.tops)

    def next_seq(self, stream: str) -> tuple[DispatchState, int]:
        seq = self.seqs.get(stream, 0) + 1
        numbered = self.copy()
        numbered.seqs = {**self.seqs, stream: seq}
        return numbered, seq

    def worker(self, name: str) -> Worker:
        return self.workers.get(name) or Worker()

    @property
    def pending(self) -> int:
        return len(self.jobs) - self.running
