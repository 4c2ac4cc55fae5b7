"""Decisions tribunal writes: `scaling-decisions` (decider), `pool-instances` (what they leave each app with)
and `justice-outcomes` (justice); and `actuations`, what an actuator made of them.

Both state targets (desired totals), not only deltas, so an actuator that sees a decision twice does no harm;
both carry their cause and a per-pool `seq` for deduplication. A decision states every app's target, or, under a
policy with `decisions: changes` (`form: changes`), the targets it changed (issue 49): the pool's whole desired
state is then the latest `pool-instances` record per app, or the decisions merged in seq order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from schemas.common import Cause, Record

Outcome = Literal["steady", "idle", "scaled", "partial", "rejected", "resized", "evicted", "observed", "policy"]
Round = Literal["free", "idle", "preempt", "release", "evict", "policy", "observed"]


class Trigger(Record):
    """What the decision answers: a metric (app, metrical), or a pool event (kind, capacity)."""

    kind: Literal["metric", "capacity", "observed", "policy", "stale"]
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


class Stabilization(Record):
    """How a stabilization window (HPA's `behavior`) shaped a report: the Number its metrical maps to, and
    the one applied (the smallest move of the window; 0 when a report of the window disagrees)."""

    direction: Literal["up", "down"]
    window_s: float
    raw_number: int
    applied_number: int
    reports: list[tuple[int, int]] = Field(description=(
        "The window's reports as (event time in ms, Number), a run of reports with the same Number as its last"))


class StaleHandling(Record):
    app: str
    silent_s: float = Field(description="Seconds since its last report (or since its policy started)")
    stale_after_s: float
    on_stale: Literal["hold", "idle", "fallback"]
    fallback_metrical: float | None = None


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
    instances: dict[str, int] = Field(description=(
        "Target instances after the decision: of every app, or (form: changes) of the apps whose count it changed "
        "(an app that left the policy at 0) and of the trigger app"))
    metricals: dict[str, float] = Field(description=(
        "Last metrical after the decision: of every app, or (form: changes) of the trigger app and of the apps "
        "whose metrical it changed (a donor reset to neutral)"))
    capacity: int
    free: int
    scores: dict[str, float] = Field(description=(
        "Preemption scores used (100 - metrical + Priority*10): of every candidate, or (form: changes) of the "
        "candidates that gave, with `scored` and `score_sum` for the rest"))
    reason_code: str
    reason: str
    mode: Literal["enforce", "observe"] = Field("enforce", description=(
        "observe: the pool's policy is observe-only; `moves` are what would move, `instances` did not change"))
    stabilization: Stabilization | None = Field(None, description="The window that shaped the reporting app's Number")
    stale: StaleHandling | None = Field(None, description="The app that went stale, and how it was handled")
    form: Literal["changes"] | None = Field(None, description=(
        "changes: `instances`, `metricals` and `scores` carry only what this decision changed (the pool's policy "
        "says `decisions: changes`); absent: they carry the whole pool"))
    scored: int | None = Field(None, ge=0, description=(
        "form: changes, after preemption: how many candidates were scored (each one's share was computed)"))
    score_sum: float | None = Field(None, description=(
        "form: changes, after preemption: the sum of every candidate's score, which the shares were computed from "
        "(exactly, rounded once)"))


class PoolInstances(Record):
    """An app's decided instances, on the compacted `pool-instances` (key `pool/app`): written with each decision
    that changed them, in its transaction, so the latest record per key is the pool's desired state. A client or
    actuator that starts reads it to the end instead of replaying the decisions."""

    type: Literal["PoolInstances"] = "PoolInstances"
    pool: str
    app: str
    instances: int = Field(ge=0, description="The app's instances after the decision (0: the app left the policy)")
    seq: int = Field(ge=1, description="The `scaling-decisions` seq of the decision that set them")
    policy_version: str
    cause: Cause


class Actuation(Record):
    """A pass of `tribunal pools actuate` that did something (applied, failed, found drift, reported to the decider),
    on `actuations` (key = pool): the audit trail of what ran, beside what was decided."""

    type: Literal["Actuation"] = "Actuation"
    pool: str
    seq: int = Field(ge=1, description="The decision whose desired state the pass worked towards")
    target: str = Field(description="process, exec, webhook, or the name of a target of the user's")
    actuator: str = Field(description="host:pid of the actuator")
    desired: dict[str, int]
    observed: dict[str, int] = Field(description="What the target said ran before the pass (apps it can see)")
    applied: dict[str, int] = Field(description="Counts set in this pass")
    failed: dict[str, str] = Field(description="Apps the target did not set, and why")
    drift: dict[str, int] = Field(description="Apps found running other than what was applied: what ran")
    reported: dict[str, int] = Field(description="Counts written to the decider as InstancesObserved")
    running: dict[str, int] = Field(description="What runs after the pass, as far as the actuator knows")
    dry_run: bool = False


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
