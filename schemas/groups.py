"""Scheduler groups (SPEC §4): the events on `scheduler-events` / `job-events` and what tribunal derives.

Every input record is keyed by its group. Event values are the flat JSON the issue fixes, so a log
written by any tool (the ZooKeeper bridge, a scheduler client, a shell script) folds the same way.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import Cause, Record

Name = Annotated[str, Field(min_length=1)]


class Published(Record):
    """Who published an event, when a process that stands in an election did (the ZooKeeper bridge does).

    `term` is the fencing token of the publisher's leadership: larger for every later leader. The limits fold
    applies no event whose term is older than one it applied for the group already, so a bridge that lost its
    leadership without knowing (cut off from ZooKeeper, or frozen between reading and publishing) cannot put
    its stale view over its successor's. Events without a term (a scheduler client, a script) are not fenced.
    """

    publisher: str | None = Field(None, description="Who published the event (the bridge: host:pid)")
    term: int | None = Field(None, ge=1, description=(
        "The publisher's leadership term: an event older than the newest term applied for its group is "
        "dead-lettered as stale_publisher"))


class SchedulerRegistered(Published):
    """A scheduler's ephemeral node appeared: it is live with fault tolerance n and alarm threshold M."""

    type: Literal["SchedulerRegistered"] = "SchedulerRegistered"
    group: Name
    scheduler: Name
    address: str = ""
    fault_tolerance: int = Field(default=1, ge=1)
    alarm_threshold: int = Field(default=10, ge=0)


class SchedulerRef(Published):
    group: Name
    scheduler: Name


class SchedulerLost(SchedulerRef):
    """The scheduler's session is gone: it holds nothing any more (its owner nodes died with it)."""

    type: Literal["SchedulerLost"] = "SchedulerLost"


class SchedulerOfflineRequested(SchedulerRef):
    """The scheduler is on the offline list: it acquires nothing and releases each job as it ends."""

    type: Literal["SchedulerOfflineRequested"] = "SchedulerOfflineRequested"


class SchedulerOnlineRequested(SchedulerRef):
    type: Literal["SchedulerOnlineRequested"] = "SchedulerOnlineRequested"


class JobRef(Published):
    group: Name
    job: Name


class JobCreated(JobRef):
    type: Literal["JobCreated"] = "JobCreated"


class JobDeleted(JobRef):
    type: Literal["JobDeleted"] = "JobDeleted"


class JobAcquired(JobRef):
    """`scheduler` created the job's owner node (the acquisition lock) and runs it."""

    type: Literal["JobAcquired"] = "JobAcquired"
    scheduler: Name


class JobReleased(JobRef):
    type: Literal["JobReleased"] = "JobReleased"
    scheduler: Name


class MembershipSnapshot(Published):
    """Everything ZooKeeper holds for the group at one moment; the fold is corrected to match it.

    `offline` is the offline list; None means the snapshot does not say (the list is kept).
    """

    type: Literal["MembershipSnapshot"] = "MembershipSnapshot"
    group: Name
    schedulers: list[SchedulerRegistered]
    jobs: dict[str, str | None]
    offline: list[str] | None = None


SchedulerEvent = Annotated[
    SchedulerRegistered | SchedulerLost | SchedulerOfflineRequested | SchedulerOnlineRequested | MembershipSnapshot,
    Field(discriminator="type"),
]
JobEvent = Annotated[JobCreated | JobDeleted | JobAcquired | JobReleased, Field(discriminator="type")]
GroupEvent = Annotated[
    SchedulerRegistered | SchedulerLost | SchedulerOfflineRequested | SchedulerOnlineRequested | MembershipSnapshot
    | JobCreated | JobDeleted | JobAcquired | JobReleased,
    Field(discriminator="type"),
]


class RejectionLimit(Record):
    """One scheduler's figures (key `group/scheduler`, compacted): emitted whenever one of them changes.

    N = 1 + K // max(S - n, 1). The scheduler may acquire while not `refuse` (X < N) and not
    `offline`; `alarm` is X > M; `drained` is offline with nothing held; `live` is false once the
    scheduler is lost (its last record on the compacted topic says so).
    """

    type: Literal["RejectionLimit"] = "RejectionLimit"
    group: str
    scheduler: str
    live: bool
    K: int
    S: int
    n: int
    N: int
    X: int
    M: int
    refuse: bool
    alarm: bool
    offline: bool
    drained: bool
    cause: Cause
    seq: int = Field(ge=1)


class Correction(Record):
    """An event the snapshot proved missing from the log, applied on its behalf, and why."""

    event: dict[str, object]
    why: str


class GroupHealth(Record):
    """The group after each input record (key = group): one record per input, carrying its cause."""

    type: Literal["GroupHealth"] = "GroupHealth"
    group: str
    event: str
    applied: bool
    note: str
    K: int
    S: int
    sum_N: int
    capacity_ok: bool
    orphans: list[str]
    offers: dict[str, str]
    corrections: list[Correction]
    skipped: list[str] = Field(default_factory=list, description="a snapshot's bad entries, named and left out")
    cause: Cause
    seq: int = Field(ge=1)


class JobOffers(Record):
    """Which online scheduler with room should take each orphan job; emitted when the offers change."""

    type: Literal["JobOffers"] = "JobOffers"
    group: str
    offers: dict[str, str]
    cause: Cause
    seq: int = Field(ge=1)


class Alert(Record):
    """A condition an operator must see: a scheduler over its alarm threshold, or capacity short of K."""

    type: Literal["Alert"] = "Alert"
    group: str
    scheduler: str | None
    kind: Literal["alarm", "alarm_cleared", "capacity_short", "capacity_restored"]
    message: str
    X: int | None = None
    M: int | None = None
    cause: Cause
    seq: int


class SchedulerAlert(Record):
    """What a scheduler client says of itself (`tribunal groups scheduler`): it holds more jobs than its alarm
    threshold.

    Written by the client to `scheduler-alerts`, not to the limits fold's `alerts`: every record of a
    fold's output topic is one the fold derived (with its cause and seq), so `replay --verify` can
    check them all, and a record a client wrote there would read as a divergence."""

    type: Literal["SchedulerAlert"] = "SchedulerAlert"
    group: str
    scheduler: str
    kind: Literal["over_threshold"] = "over_threshold"
    message: str
    X: int
    M: int
