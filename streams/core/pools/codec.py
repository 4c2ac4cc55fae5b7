"""A pool's state as JSON-able mappings, for the worker's changelog-backed tables, and back.

Policies change rarely and can be large, so they are kept apart from the per-record state: the
worker writes `dump_policies` only when a policy record applied, and `dump_state` for every
record. `load(dump_state(s), dump_policies(s)) == s` for every state (a property test holds
it to that), so a worker that recovers from the changelog folds on exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.policy import DeciderPolicy, JusticePolicy, published
from streams.core.pools import justice
from streams.core.pools.fold import PoolState
from streams.core.pools.rules import compile_policy
from streams.core.pools.timing import Timing
from streams.core.pools.verdicts import DeciderState


def dump_policies(state: PoolState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if state.decider is not None and state.decider.policy.source is not None:
        out["decider"] = published(state.decider.policy.source)
    if state.justice is not None and state.justice.policy.source is not None:
        out["justice"] = published(state.justice.policy.source)
    return out


def dump_state(state: PoolState) -> dict[str, Any]:
    out: dict[str, Any] = {"seqs": dict(state.seqs), "offsets": dict(state.offsets), "applied": state.applied}
    if state.decider is not None:
        d = state.decider
        instances, metricals = d.by_key()
        out["decider"] = {"version": d.policy.version, "capacity": d.capacity, "instances": dict(instances),
                          "metricals": dict(metricals)}
        if d.timing is not None:
            t = d.timing
            out["decider"]["timing"] = {
                "now": t.now, "started": dict(t.started), "reported": dict(t.reported), "numbers": dict(t.numbers),
                "stale": sorted(t.stale),
                "preempted": dict(t.preempted), "reports": {k: [list(r) for r in v] for k, v in t.reports.items()}}
    if state.justice is not None:
        out["justice"] = {"version": state.justice.policy.version, "targets": dict(state.justice.targets)}
    return out


def policies_changed(before: PoolState, after: PoolState) -> bool:
    """Whether a policy record applied: folds keep the very same compiled policy object otherwise."""
    def policies(s: PoolState) -> tuple[object, object]:
        return (s.decider.policy if s.decider else None, s.justice.policy if s.justice else None)

    return any(a is not b for a, b in zip(policies(before), policies(after), strict=True))


def load(state: Mapping[str, Any] | None, policies: Mapping[str, Any] | None = None) -> PoolState:
    """The inverse of the dumps: the per-record state, and the policies it was folded under."""
    if not state:
        return PoolState()
    policies = policies or {}
    dec = None
    if "decider" in state:
        compiled = compile_policy(DeciderPolicy.model_validate(policies["decider"]))
        s = state["decider"]
        t = s.get("timing")
        timing = None if t is None else Timing(
            now=int(t["now"]), started={k: int(v) for k, v in t["started"].items()},
            reported={k: int(v) for k, v in t["reported"].items()},
            reports={k: tuple((int(at), int(n)) for at, n in v) for k, v in t["reports"].items()},
            numbers={k: int(v) for k, v in t["numbers"].items()}, stale=frozenset(t["stale"]),
            preempted={k: int(v) for k, v in t["preempted"].items()})
        dec = DeciderState.of(compiled, int(s["capacity"]), dict(s["instances"]),
                                      {k: float(v) for k, v in s["metricals"].items()}, timing)
    jus = None
    if "justice" in state:
        rules = justice.compile_policy(JusticePolicy.model_validate(policies["justice"]))
        jus = justice.JusticeState(rules, dict(state["justice"]["targets"]))
    return PoolState(dec, jus, dict(state["seqs"]), dict(state["offsets"]), int(state.get("applied", 0)))
