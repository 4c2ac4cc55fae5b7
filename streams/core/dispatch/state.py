"""A dispatcher namespace's state: its jobs, its workers' caps and counts, and the queues that order them.

Frozen like every fold's state, and built so that a record's cost grows with the log, not the
number, of the jobs pending: the jobs and workers are persistent hash array mapped tries
(`immutables.Map`, in C), the queues persistent heaps of sorted runs (`heap`), so a record copies
O(log n) of them.

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

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from immutables import Map

from streams.core.admission import NO_COUNTS
from streams.core.dispatch.heap import Heap

DEFAULT_MAX_THREADS = 100  # the seed's `elastic_dispatcher_config` row: threads, max 100
EMPTY: Map[str, Any] = Map()


class Job(NamedTuple):
    uuid: str
    external_id: str
    info: str
    worker: str
    expected_start: int
    acceptable_start: int
    order: int  # the job's place among all jobs assigned in the namespace: ties broken by it
    max_retries: int
    timeout_ms: int
    attempt: int = 0  # attempts started so far
    running: bool = False
    started_at: int = 0
    deadline: int = 0


def bucket_of(uuid: str) -> str:
    """The bucket a job is stored in: its uuid's first byte (256 buckets)."""
    return uuid[:2]


class Jobs:
    """A namespace's jobs by uuid, kept in buckets by `bucket_of` so that the worker's table stores a
    bucket per entry and a record rewrites only the buckets it `touched`, not every job (one entry of
    10,000 jobs is over Kafka's 1 MB request). Persistent: every change returns a new `Jobs`."""

    __slots__ = ("buckets", "count", "touched")

    def __init__(self, buckets: Map[str, Map[str, Job]] = EMPTY, count: int = 0,
                 touched: frozenset[str] = frozenset()) -> None:
        self.buckets, self.count, self.touched = buckets, count, touched  # touched: since the record began

    def get(self, uuid: str) -> Job | None:
        bucket = self.buckets.get(bucket_of(uuid))
        return None if bucket is None else bucket.get(uuid)

    def __getitem__(self, uuid: str) -> Job:
        job = self.get(uuid)
        if job is None:
            raise KeyError(uuid)
        return job

    def __contains__(self, uuid: object) -> bool:
        return isinstance(uuid, str) and self.get(uuid) is not None

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:  # the same jobs (what a record touched is not the state)
        return isinstance(other, Jobs) and self.count == other.count and self.buckets == other.buckets

    __hash__ = None  # type: ignore[assignment]

    def values(self) -> Iterator[Job]:
        for bucket in self.buckets.values():
            yield from bucket.values()

    def set(self, job: Job) -> Jobs:
        name = bucket_of(job.uuid)
        bucket = self.buckets.get(name) or EMPTY
        count = self.count if job.uuid in bucket else self.count + 1
        return Jobs(self.buckets.set(name, bucket.set(job.uuid, job)), count, self.touched | {name})

    def added(self, jobs: Iterable[Job]) -> Jobs:
        """With new `jobs` (an assign's), in one pass."""
        count, names = self.count, set()
        with self.buckets.mutate() as buckets:
            for job in jobs:
                name = bucket_of(job.uuid)
                bucket = buckets.get(name) or EMPTY
                count += job.uuid not in bucket
                buckets[name] = bucket.set(job.uuid, job)
                names.add(name)
            done = buckets.finish()
        return Jobs(done, count, self.touched | names)

    def delete(self, uuid: str) -> Jobs:
        name = bucket_of(uuid)
        bucket = self.buckets[name].delete(uuid)
        buckets = self.buckets.set(name, bucket) if bucket else self.buckets.delete(name)
        return Jobs(buckets, self.count - 1, self.touched | {name})

    def untouched(self) -> Jobs:
        """The same jobs, with nothing touched yet (a record begins)."""
        return Jobs(self.buckets, self.count) if self.touched else self


class Worker(NamedTuple):
    max: int | None = None  # None: only the namespace's cap holds
    running: int = 0
    pending: int = 0
    ready: Heap = None

    def has_room(self) -> bool:
        return self.max is None or self.running < self.max


class DispatchState(NamedTuple):
    offsets: Mapping[str, int] = NO_COUNTS
    applied: int = 0
    seqs: Mapping[str, int] = NO_COUNTS
    now: int = 0
    max: int = DEFAULT_MAX_THREADS
    running: int = 0
    assigned: int = 0  # jobs assigned so far: the next job's `order`
    jobs: Jobs = Jobs()
    workers: Map[str, Worker] = Map()
    waiting: Heap = None
    deadlines: Heap = None
    deadline_entries: int = 0  # in `deadlines`, live or stale (it is rebuilt when too many are stale)
    tops: Heap = None

    def next_seq(self, stream: str) -> tuple[DispatchState, int]:
        seq = self.seqs.get(stream, 0) + 1
        return self._replace(seqs={**self.seqs, stream: seq}), seq

    def worker(self, name: str) -> Worker:
        return self.workers.get(name) or Worker()

    @property
    def pending(self) -> int:
        return len(self.jobs) - self.running
