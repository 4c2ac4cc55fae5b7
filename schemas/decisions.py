"""Decisions tribunal writes: `scaling-decisions` (decider) and `justice-outcomes` (justice).

Both state targets (desired totals for every app), not only deltas, so an actuator that sees a
decision twice does no harm; both carry their cause and a per-pool `seq` for deduplication.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import Cause, Record

Outcome = Literal["steady", "idle", "scaled", "partial", "rejected", "resized", "evicted", "observed", "policy"]
Round = Literal["free", "idle", "preempt", "release", "evict", "policy", "observed"]


class Trigger(Record):
    """What the decision answers: a metric (app, metrical), or a pool event (kind, capacity)."""

    kind: Literal["metric", "capacity", "observed", "policy"]
    app: str | None = None
    metrical: float | None = None
    capacity: int | None = None


class Move(Record):
    """`count` instances go from an app (or the free pool) to another app (or the free pool)."""

    model_config = Record.model_config | {"validate_by_name": True, "validate_by_alias": True,
                                          "serialize_by_alias": True}

    from_: str = Field(alias="from", serialization_alias="from")
    to: str
    count: int = Field(ge=1)
    round: Round


class ScalingDecision(Record):
    type: Literal["ScalingDecision"] = "ScalingDecision"
    pool: str
    seq: int = Field(ge=1)
    cause: Cause
    policy_version: str
    trigger: Trigger
    outcome: Outcome
    requested: int = Field(ge=0, description="Instances the trigger asked for (after MaxNum)")
    granted: int = Field(ge=0)
    moves: list[Move]
    instances: dict[str, int] = Field(description="Target instances of every app after the decision")
    metricals: dict[str, float] = Field(description="Last metrical of every app after the decision")
    capacity: int
    free: int
    scores: dict[str, float] = Field(description="Preemption scores used (100 - metrical + Priority*10)")
    reason_code: str
    reason: str


class JusticeOutcome(Record):
    type: Literal["JusticeOutcome"] = "JusticeOutcome"
    pool: str
    seq: int = Field(ge=1)
    cause: Cause
    policy_version: str
    driver: str
    metrical: float | None = Field(description="The driver's metrical; null when a policy record applied")
    outcome: Literal["applied", "no_rule", "policy"]
    rule: tuple[float, float] | None = Field(description="The driver's range that matched")
    targets: dict[str, int]
    deltas: dict[str, int] = Field(description="targets minus the previous targets (0 before the first)")
    changed: bool
    reason: str
