"""Justice (SPEC §3): one driver app's metrical sets the target count of every app in the pool.

Choices where the seed is silent: every app named anywhere in the policy has a target once a
rule applied (an app the matching rule does not list gets 0, so the per-rule capacity check
holds for the whole pool); before the first rule applies there are no targets, and deltas are
taken against 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from schemas.policy import METRICAL_MAX, JusticePolicy
from streams.core.pools.ranges import in_range


@dataclass(frozen=True, slots=True)
class JusticeRules:
    version: str
    driver: str
    apps: Mapping[str, str]  # key -> name as the policy spells it (first spelling wins)
    rules: tuple[tuple[float, float, Mapping[str, int]], ...]  # (lo, hi, key -> target), sorted
    source: JusticePolicy | None = field(default=None, compare=False)  # the record it was compiled from


def compile_policy(policy: JusticePolicy) -> JusticeRules:
    apps: dict[str, str] = {policy.policy.App.casefold(): policy.policy.App}
    for rule in policy.policy.Spec:
        for target in rule.Apps:
            apps.setdefault(target.App.casefold(), target.App)
    rules = tuple(sorted(
        (rule.Metrical[0], rule.Metrical[1], {t.App.casefold(): t.Number for t in rule.Apps})
        for rule in policy.policy.Spec))
    return JusticeRules(version=policy.version, driver=policy.policy.App, apps=dict(sorted(apps.items())),
                        rules=rules, source=policy)


class JusticeState(NamedTuple):
    policy: JusticeRules
    targets: Mapping[str, int]  # key -> target; empty until a rule first applies


@dataclass(frozen=True, slots=True)
class JusticeVerdict:
    outcome: Literal["applied", "no_rule", "policy"]
    rule: tuple[float, float] | None
    targets: Mapping[str, int]  # by policy spelling
    deltas: Mapping[str, int]
    changed: bool
    reason: str


def adopt(state: JusticeState | None, policy: JusticePolicy) -> JusticeState:
    """A new policy version takes effect for the next metric; current targets stand until then."""
    return JusticeState(compile_policy(policy), state.targets if state else {})


def on_metric(state: JusticeState, metrical: float) -> tuple[JusticeState, JusticeVerdict]:
    """A metrical of the driver: the matching rule's targets, or `no_rule` in a gap."""
    p = state.policy
    names = p.apps
    for lo, hi, targets in p.rules:
        if in_range(lo, hi, metrical):
            new = {key: targets.get(key, 0) for key in names}
            deltas = {names[k]: new[k] - state.targets.get(k, 0) for k in names}
            changed = new != dict(state.targets)
            verdict = JusticeVerdict(
                "applied", (lo, hi), {names[k]: v for k, v in new.items()}, deltas, changed,
                f"{p.driver} at {metrical:g} is in [{lo:g}, {hi:g}"
                + ("]" if hi == METRICAL_MAX else ")") + (": targets changed" if changed else ": targets unchanged"))
            return state._replace(targets=new), verdict
    current = {names[k]: v for k, v in state.targets.items()}
    return state, JusticeVerdict("no_rule", None, current, dict.fromkeys(current, 0), False,
                                 f"{p.driver} at {metrical:g} matches no rule: targets unchanged")
