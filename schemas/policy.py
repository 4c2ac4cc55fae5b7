"""Policy documents (SPEC §2, §3): the seed's decider and justice formats, versioned, per pool.

Errors name the field, the app and the range at fault. Each app is validated on its own, so a
document with several broken apps reports all of them at once.
"""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from schemas.common import Bounded

METRICAL_MAX = 100


class _Seed(Bounded):
    """The seed's capitalised documents: unknown keys are rejected so typos do not pass silently."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _range(value: Any) -> Any:
    # The seed's justice document writes [0-20], which YAML reads as ["0-20"].
    if isinstance(value, list | tuple) and len(value) == 1 and isinstance(value[0], str):
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*", value[0])
        if m:
            return [float(m.group(1)), float(m.group(2))]
    return value


Bounds = tuple[float, float]


def fmt(bounds: Bounds) -> str:
    lo, hi = bounds
    return f"[{lo:g}, {hi:g}{']' if hi == METRICAL_MAX else ')'}"


def range_problems(bounds: list[Bounds], *, must_cover: bool) -> list[str]:
    """Overlaps, gaps, bad bounds, and (for the decider) [0, 100] not covered, as sentences."""
    problems = [f"range {fmt(b)} is not within [0, 100] with low < high"
                for b in bounds if not (0 <= b[0] < b[1] <= METRICAL_MAX)]
    ordered = sorted(bounds)
    for prev, cur in itertools.pairwise(ordered):
        if cur[0] < prev[1]:
            problems.append(f"range {fmt(cur)} overlaps {fmt(prev)}")
        elif must_cover and cur[0] > prev[1]:
            problems.append(f"gap between {fmt(prev)} and {fmt(cur)}: ({prev[1]:g}, {cur[0]:g}) is not covered")
    if must_cover and ordered:
        if ordered[0][0] > 0:
            problems.append(f"gap: [0, {ordered[0][0]:g}) is not covered")
        if ordered[-1][1] < METRICAL_MAX:
            problems.append(f"gap: [{ordered[-1][1]:g}, 100] is not covered")
    if must_cover and not ordered:
        problems.append("no ranges: [0, 100] is not covered")
    return problems


class SpecRange(_Seed):
    Metrical: tuple[float, float]
    Number: int

    _split = field_validator("Metrical", mode="before")(classmethod(lambda cls, v: _range(v)))


class FallbackMetrical(_Seed):
    """`on_stale: {fallback_metrical: 40}`: a silent app is decided for as if it had reported 40."""

    fallback_metrical: float = Field(ge=0, le=METRICAL_MAX)


OnStale = Literal["hold", "idle"] | FallbackMetrical
Seconds = Annotated[float, Field(ge=0.001, le=7 * 24 * 3600)]  # event time is counted in milliseconds
Window = Annotated[float, Field(ge=0.001, le=3600)]  # HPA's longest stabilization window


class AppPolicy(_Seed):
    """One app of a decider policy: its priority (1 = highest), floor, optional ceiling and ranges, and
    (optional, HPA's `behavior` and KEDA's fallback) its stabilization windows and stale-report handling.

    Windows and staleness are measured in event time: the reports' own timestamps and the pool's ticks."""

    App: str = Field(min_length=1)
    Priority: int = Field(ge=1, le=10)
    MinNum: int = Field(ge=0)
    MaxNum: int | None = Field(default=None, ge=0)
    release: Literal["lazy", "eager"] = "lazy"
    Spec: list[SpecRange]
    scale_down_stabilization_s: Window | None = Field(default=None, description=(
        "Give instances up only when every report of the last this many seconds would, and then the "
        "smallest give-up among them"))
    scale_up_stabilization_s: Window | None = Field(default=None, description=(
        "Grow only when every report of the last this many seconds would, and then by the smallest growth "
        "among them"))
    stale_after_s: Seconds | None = Field(default=None, description=(
        "An app with no report for this long is handled as `on_stale` says, until it reports again"))
    on_stale: OnStale | None = Field(default=None, description=(
        "hold (keep its instances, give none up), idle (offer all above MinNum), or "
        "{fallback_metrical: N} (as if it reported N); hold when not given"))

    def stale_handling(self) -> tuple[Literal["hold", "idle", "fallback"], float | None]:
        """`on_stale` as (how, the fallback metrical when it is one): hold when not given."""
        given = self.on_stale or "hold"
        if isinstance(given, FallbackMetrical):
            return "fallback", given.fallback_metrical
        return given, None

    @field_validator("on_stale", mode="wrap")
    @classmethod
    def _one_of_three(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """One message for the three forms, not one per branch of the union."""
        try:
            return handler(value)
        except ValidationError:
            raise ValueError(f"on_stale must be hold, idle or {{fallback_metrical: N}} with N in [0, 100], "
                             f"not {value!r}") from None

    @model_validator(mode="after")
    def _ranges_cover_0_to_100(self) -> AppPolicy:
        problems = range_problems([s.Metrical for s in self.Spec], must_cover=True)
        if self.MaxNum is not None and self.MaxNum < self.MinNum:
            problems.append(f"MaxNum {self.MaxNum} is below MinNum {self.MinNum}")
        if self.on_stale is not None and self.stale_after_s is None:
            problems.append("on_stale needs stale_after_s (how long without a report makes the app stale)")
        if problems:
            raise ValueError(f"app {self.App!r}: " + "; ".join(problems))
        return self


class DeciderPolicy(Bounded):
    """`{"kind": "decider", "version": "v3", "capacity": 10, "initial": {...}, "apps": [...]}`.

    The pool-wide options are optional; a policy without them decides exactly as the seed's does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["decider"] = "decider"
    version: str = Field(min_length=1)
    capacity: int | None = Field(default=None, ge=0)
    initial: dict[str, int] = Field(default_factory=dict)
    apps: list[AppPolicy] = Field(min_length=1)
    observe_only: bool = Field(default=False, description=(
        "Compute and write decisions (mode: observe) but never change the pool's instances: a candidate "
        "policy on a second pool key, fed the same reports and observed instances as the pool in force"))
    max_moves_per_decision: int | None = Field(default=None, ge=1, description=(
        "At most this many instances move in one decision (growth, release); evictions are not capped"))
    preempted_cooldown_s: Seconds | None = Field(default=None, description=(
        "An app preempted is not preempted again for this many seconds"))
    decisions: Literal["whole", "changes"] | None = Field(default=None, description=(
        "What a ScalingDecision carries: `whole` (the default) every app's instances and metricals and every "
        "candidate's score, each decision a self-contained record; `changes` only what the decision changed "
        "(instances of the apps whose count changed and of the trigger app, metricals of the trigger app and of "
        "those it reset, scores of the candidates that gave), so a decision at 1,000 apps is about as large as one "
        "at 10. The pool's whole desired state is on `pool-instances` either way"))

    def timed(self) -> bool:
        """Whether any option measured in time is set: such a policy keeps the reports' times and dead-letters
        a report older than its app's last one (`out_of_order`)."""
        return self.preempted_cooldown_s is not None or any(
            a.scale_down_stabilization_s or a.scale_up_stabilization_s or a.stale_after_s for a in self.apps)

    @model_validator(mode="after")
    def _consistent(self) -> DeciderPolicy:
        problems = []
        names: dict[str, str] = {}
        for app in self.apps:
            if app.App.casefold() in names:
                problems.append(f"app {app.App!r} appears twice (names match case-insensitively)")
            names[app.App.casefold()] = app.App
        by_name = {a.App.casefold(): a for a in self.apps}
        for name, count in sorted(self.initial.items()):
            found = by_name.get(name.casefold())
            if found is None:
                problems.append(f"initial: {name!r} is not an app of this policy")
            elif count < found.MinNum or (found.MaxNum is not None and count > found.MaxNum):
                problems.append(f"initial: app {found.App!r} starts at {count}, outside MinNum {found.MinNum}"
                                + (f" .. MaxNum {found.MaxNum}" if found.MaxNum is not None else ""))
        if count_negative := [n for n, c in self.initial.items() if c < 0]:
            problems.append(f"initial: negative counts for {sorted(count_negative)}")
        start = self.starting_instances()
        if self.capacity is not None:
            if sum(a.MinNum for a in self.apps) > self.capacity:
                problems.append(f"capacity {self.capacity} is below the sum of MinNum "
                                f"({sum(a.MinNum for a in self.apps)})")
            elif sum(start.values()) > self.capacity:
                problems.append(f"initial instances ({sum(start.values())}) exceed capacity {self.capacity}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def starting_instances(self) -> dict[str, int]:
        """App -> instances when the pool starts: `initial`, else MinNum (SPEC §2)."""
        initial = {k.casefold(): v for k, v in self.initial.items()}
        return {a.App: initial.get(a.App.casefold(), a.MinNum) for a in self.apps}


class JusticeTarget(_Seed):
    App: str = Field(min_length=1)
    Number: int = Field(ge=0)


class JusticeRule(_Seed):
    Metrical: tuple[float, float]
    Apps: list[JusticeTarget] = Field(min_length=1)

    _split = field_validator("Metrical", mode="before")(classmethod(lambda cls, v: _range(v)))


class JusticeSpec(_Seed):
    """The driver app and, per range of its metrical, the target count of every listed app.

    The seed spells the rule list `Sepc`; it is accepted as an alias of the corrected `Spec`.
    """

    App: str = Field(min_length=1)
    Spec: list[JusticeRule] = Field(min_length=1, validation_alias=AliasChoices("Spec", "Sepc"))


class JusticePolicy(Bounded):
    """`{"kind": "justice", "version": "v1", "capacity": 20, "policy": {...}}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["justice"] = "justice"
    version: str = Field(min_length=1)
    capacity: int | None = Field(default=None, ge=0)
    policy: JusticeSpec

    @model_validator(mode="after")
    def _consistent(self) -> JusticePolicy:
        driver = self.policy.App
        problems = [f"driver {driver!r}: {p}" for p in
                    range_problems([r.Metrical for r in self.policy.Spec], must_cover=False)]
        for rule in self.policy.Spec:
            names = [t.App.casefold() for t in rule.Apps]
            if len(set(names)) != len(names):
                problems.append(f"range {fmt(rule.Metrical)}: an app is listed twice")
            total = sum(t.Number for t in rule.Apps)
            if self.capacity is not None and total > self.capacity:
                problems.append(f"range {fmt(rule.Metrical)}: targets sum to {total}, "
                                f"more than capacity {self.capacity}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


PolicyRecord = Annotated[DeciderPolicy | JusticePolicy, Field(discriminator="kind")]


POOL_OPTIONS = ("observe_only", "max_moves_per_decision", "preempted_cooldown_s", "decisions")
APP_OPTIONS = ("scale_down_stabilization_s", "scale_up_stabilization_s", "stale_after_s", "on_stale")


def published(policy: DeciderPolicy | JusticePolicy) -> dict[str, Any]:
    """The record as written to `policies` and the changelog: the options beyond the seed only where set, so a
    policy without them reads as before they existed (and a worker of that time still accepts it)."""
    data = policy.model_dump(mode="json", by_alias=False)
    if isinstance(policy, DeciderPolicy):
        for key in POOL_OPTIONS:
            if data[key] in (None, False):
                del data[key]
        for app in data["apps"]:
            for key in APP_OPTIONS:
                if app[key] is None:
                    del app[key]
    return data
