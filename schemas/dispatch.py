"""The dispatcher (SPEC §5, seed 002): commands on `dispatch-commands`, `Tick`s on `ticks`, and what it decides.

Every record is keyed by its namespace, the scope of one global cap. Times are milliseconds since
the epoch; a namespace's `now` is the latest timestamp of its records (the broker's: `Tick`s between
commands), never a worker's clock.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from schemas.common import INT64_MAX, MAX_MILLIS, NUMBER, Cause, Record

Name = Annotated[str, Field(min_length=1, max_length=200)]
Millis = Annotated[int, Field(ge=0, le=MAX_MILLIS, description="milliseconds since the epoch (at most 9999-12-31)"),
                   NUMBER]
Cap = Annotated[int, Field(ge=0, le=INT64_MAX, description="jobs that may run at once"), NUMBER]
MAX_JOBS_PER_ASSIGN = 10_000
MAX_RETRIES = 1_000
Attempt = Annotated[int, Field(ge=1, le=MAX_RETRIES + 1, description=(
    "the attempt the report ends, as its `JobStarted` numbered it: a report for an attempt that is no longer "
    "running is dead-lettered (`late_report`), never applied to a later attempt. None: whichever attempt is "
    "running (a report that outlives its attempt's timeout then ends the retry)")), NUMBER]
MAX_TIMEOUT_MS = 366 * 24 * 3600 * 1000  # a timeout of more than a year is not a timeout
Principal = Annotated[Name | None, Field(description=(
    "who sent the command: the name of the dispatcher API's identity (a token's name, or a client certificate's "
    "common name) it came through. Absent: written before commands named their sender, or by a Kafka producer "
    "directly, whom the topic's ACLs name (anyone allowed to write the topic can write any principal)"))]


class Command(Record):
    """What every dispatcher command has: its namespace (the record key) and who sent it."""

    namespace: Name
    principal: Principal = None


class MaxThreadsSet(Command):
    """The seed's `setMaxThreads`: how many jobs of the namespace may run at once."""

    type: Literal["MaxThreadsSet"] = "MaxThreadsSet"
    max: Cap


class WorkerMaxSet(Command):
    """How many jobs of one worker (tenant) may run at once; without one, only the global cap holds."""

    type: Literal["WorkerMaxSet"] = "WorkerMaxSet"
    worker: Name
    max: Cap


class JobSpec(Record):
    external_id: str = Field(max_length=200, description="the client's own id for the job")
    info: str = Field("", max_length=1_000, description="opaque to the dispatcher; handed to the listener "
                      "(bounded: a namespace's jobs are stored in 256 table entries of at most 1 MB each)")
    max_retries: Annotated[int, Field(ge=0, le=MAX_RETRIES), NUMBER] = 0
    timeout_ms: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS, description="how long an attempt may run (at most "
                                     "366 days)"), NUMBER] = 60_000


class Assignment(Record):
    """The seed's `JobAssign`: n jobs for `worker`, each expected at `start`, acceptable starts spread
    evenly over [start, end] (first at `start`, last at `end`; one job: `start`). `end` must not be before
    `start` (a rule between two fields, which JSON Schema cannot state)."""

    worker: Name
    start: Millis
    end: Millis
    jobs: list[JobSpec] = Field(min_length=1, max_length=MAX_JOBS_PER_ASSIGN)
    request_id: str | None = Field(None, max_length=200, description="echoed in `JobsAccepted`")

    @model_validator(mode="after")
    def _ordered(self) -> Assignment:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class JobsAssigned(Assignment, Command):
    """An `Assignment` in a namespace: the command on `dispatch-commands`."""

    type: Literal["JobsAssigned"] = "JobsAssigned"


class JobRef(Command):
    uuid: Name


class AttemptRef(JobRef):
    attempt: Attempt | None = None


class JobFinished(AttemptRef):
    """The client's `finishJob`: the running job is done."""

    type: Literal["JobFinished"] = "JobFinished"


class JobFailed(AttemptRef):
    """The client reports the running attempt failed; it is retried while attempts remain."""

    type: Literal["JobFailed"] = "JobFailed"
    error: str = Field("", max_length=10_000)


class JobCancelled(JobRef):
    """Withdraw a pending or running job; it will not start (again)."""

    type: Literal["JobCancelled"] = "JobCancelled"


Commands = MaxThreadsSet | WorkerMaxSet | JobsAssigned | JobFinished | JobFailed | JobCancelled
DispatchCommand = Annotated[Commands, Field(discriminator="type")]


class Tick(Record):
    """A namespace's clock moves (key = namespace): the record's timestamp, the broker's, is the time; `now` is
    what the ticker read."""

    type: Literal["Tick"] = "Tick"
    namespace: Name
    now: Millis


class JobStarted(Record):
    """What the seed's `onJobStart` listener receives (on `job-starts`, key = namespace)."""

    type: Literal["JobStarted"] = "JobStarted"
    namespace: str
    uuid: str
    external_id: str
    worker: str
    info: str
    attempt: int = Field(ge=1)
    started_at: int
    deadline: int
    expected_start: int  # when it became startable, and the start it should have by (its lateness is measured
    acceptable_start: int  # from these: the listener and `explain` need not look the job up)
    cause: Cause
    seq: int = Field(ge=1)


class JobOutcome(Record):
    """A job's outcome on `job-outcomes` (key = namespace); `final` when the job is done with for good."""

    type: Literal["JobTimedOut", "JobRetryScheduled", "JobFailedFinally", "JobFinished", "JobCancelled"]
    namespace: str
    uuid: str
    external_id: str
    worker: str
    attempt: int = Field(ge=0, description="the attempt this outcome ends (0: cancelled before any start)")
    at: int = Field(description="the namespace's `now` when it happened")
    final: bool
    error: str = ""
    cause: Cause
    seq: int = Field(ge=1)


class JobsAccepted(Record):
    """An assign's jobs, in order, with the uuids the dispatcher made for them (on `job-outcomes`)."""

    type: Literal["JobsAccepted"] = "JobsAccepted"
    namespace: str
    worker: str
    request_id: str | None
    uuids: list[str]
    cause: Cause
    seq: int = Field(ge=1)


class WorkerLoad(Record):
    running: int
    max: int | None
    pending: int


class DispatcherHealth(Record):
    """The namespace after each Tick, cap change and assign (on `dispatcher-health`, compacted, key =
    namespace); a finish, failure or cancel writes its outcome, and the next Tick the health."""

    type: Literal["DispatcherHealth"] = "DispatcherHealth"
    namespace: str
    now: int
    running: int
    max: int
    pending: int
    oldest_lateness_ms: int = Field(description="how long the longest-waiting startable job has waited, 0 if none")
    workers: dict[str, WorkerLoad]
    cause: Cause
    seq: int = Field(ge=1)
