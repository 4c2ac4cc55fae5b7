"""Cluster events on `cluster-events` (key = pool): what the pool can run and what actually runs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import MAX_MILLIS, Record


class PoolCapacitySet(Record):
    """The pool can now run `capacity` instances (machines added or taken away)."""

    type: Literal["PoolCapacitySet"] = "PoolCapacitySet"
    pool: str | None = None
    capacity: int = Field(ge=0)


class InstancesObserved(Record):
    """The actuator's count of instances actually running, per app (apps not listed keep theirs)."""

    type: Literal["InstancesObserved"] = "InstancesObserved"
    pool: str | None = None
    instances: dict[str, Annotated[int, Field(ge=0)]]


class PoolTick(Record):
    """The time, for a pool whose policy measures time (stale reports, windows, cool-downs): `tribunal dispatch ticker
    --pool` writes one every interval, so an app that stops reporting goes stale even in a silent pool. The pool's
    clock takes the record's timestamp (the broker's), as for every record; `now` is what the ticker read."""

    type: Literal["Tick"] = "Tick"
    pool: str | None = None
    now: int = Field(ge=0, le=MAX_MILLIS, description="Milliseconds since the epoch, as the ticker read them (the "
                     "record's timestamp is what moves the clock)")


ClusterEvent = Annotated[PoolCapacitySet | InstancesObserved | PoolTick, Field(discriminator="type")]
