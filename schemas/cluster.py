"""Cluster events on `cluster-events` (key = pool): what the pool can run and what actually runs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.common import Record


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


ClusterEvent = Annotated[PoolCapacitySet | InstancesObserved, Field(discriminator="type")]
