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

from collections.abc import Mapping
from typing import NamedTuple

from immutables import Map

from streams.core.admission import NO_COUNTS
from streams.core.buckets import Buckets
from streams.core.dispatch.heap import Heap

DEFAULT_MAX_THREADS = 100  # the seed's `elastic_dispatcher_config` row: threads, max 100


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


Jobs = Buckets[Job]  # a namespace's jobs by uuid, in buckets by `bucket_of`: a table entry per bucket
NO_JOBS: Jobs = Buckets(bucket_of)


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
    jobs: Jobs = NO_JOBS
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
