"""A pool as an operator reads it (`tribunal pools state`, `explain`, `report`), and what `explain` adds to a
decision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.core.pools.fold import PoolState
from streams.core.pools.ranges import in_range


def gauges(state: PoolState) -> dict[str, float]:
    """The instances a pool has free under its decider policy (none before a policy)."""
    return {} if state.decider is None else {"tribunal_pool_free_instances": float(state.decider.free)}


def describe(pool_id: str, state: PoolState) -> dict[str, Any]:
    """What `tribunal pools state` shows: a pool as an operator reads it."""
    out: dict[str, Any] = {"pool": pool_id, "seqs": dict(state.seqs), "offsets": dict(state.offsets)}
    if state.decider is not None:
        d = state.decider
        out["decider"] = {
            "policy_version": d.policy.version, "capacity": d.capacity, "free": d.free,
            "apps": [{"app": r.name, "priority": r.priority, "min": r.min_num, "max": r.max_num,
                      "instances": d.instances[r.key], "metrical": d.metricals[r.key],
                      "idle": r.key in d.idle[r.priority]} for r in d.policy.rules]}
    if state.justice is not None:
        j = state.justice
        out["justice"] = {"policy_version": j.policy.version, "driver": j.policy.driver,
                          "targets": {j.policy.apps[k]: v for k, v in j.targets.items()}}
    return out


def explain(before: PoolState, outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """A decision's rounds and the trigger's ranges, or a justice outcome's rule: what `explain` shows."""
    out: dict[str, Any] = {}
    decisions = [_decision(output, before) for output in outputs if output["type"] == "ScalingDecision"]
    if decisions:
        out["decision"] = decisions[-1]  # the record's own; before it, those of apps it found stale
        if len(decisions) > 1:
            out["stale_decisions"] = decisions[:-1]
    for output in outputs:
        if output["type"] == "JusticeOutcome":
            out["justice"] = {k: output[k] for k in ("policy_version", "driver", "metrical", "outcome", "rule",
                                                     "targets", "deltas", "reason")}
    return out


def _decision(decision: Mapping[str, Any], before: PoolState) -> dict[str, Any]:
    """The decision's rounds, with the trigger app's ranges and which one its metrical fell in."""
    rounds: dict[str, list[dict[str, Any]]] = {}
    for move in decision["moves"]:
        rounds.setdefault(move["round"], []).append(move)
    preempted = sum(m["count"] for m in rounds.get("preempt", []))
    shares = {m["from"]: {"count": m["count"], "share": m["count"] / preempted} for m in rounds.get("preempt", [])}
    detail: dict[str, Any] = {
        "seq": decision["seq"], "policy_version": decision["policy_version"], "trigger": decision["trigger"],
        "outcome": decision["outcome"], "requested": decision["requested"], "granted": decision["granted"],
        "rounds": rounds, "preemption_shares": shares, "scores": decision["scores"],
        "free_after": decision["free"], "instances_after": decision["instances"],
        "reason_code": decision["reason_code"], "reason": decision["reason"]}
    detail.update({k: decision[k] for k in ("mode", "stabilization", "stale") if k in decision})
    app = decision["trigger"].get("app")
    policy = before.decider.policy if before.decider is not None else None
    if app is not None and policy is not None and app.casefold() in policy.by_key:
        rule = policy.by_key[app.casefold()]
        metrical = decision["trigger"]["metrical"]
        detail["ranges"] = [{"metrical": [lo, hi], "number": number,
                             "matched": metrical is not None and in_range(lo, hi, metrical)}
                            for lo, hi, number in rule.ranges]
        detail["app"] = {"app": rule.name, "priority": rule.priority, "min": rule.min_num, "max": rule.max_num}
    return detail


def render(found: Mapping[str, Any]) -> list[str]:
    """`explain`'s text for a pool record: the decision's rounds, or the justice outcome."""
    lines: list[str] = []
    for earlier in found.get("stale_decisions", ()):
        lines += _render_decision(earlier, {}, {})
    d = found.get("decision")
    if d is not None:
        lines += _render_decision(d, found["before"], found["after"])
    if "justice" in found:
        j = found["justice"]
        lines += [f"justice policy {j['policy_version']}, driver {j['driver']} at {j['metrical']}: {j['outcome']}",
                  f"        targets {j['targets']}, deltas {j['deltas']}", f"reason  {j['reason']}"]
    return lines


def _render_decision(d: Mapping[str, Any], before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    t = d["trigger"]
    what = t["kind"]
    if t["kind"] == "metric":
        what = f"{t['app']} reports {t['metrical']:g}"
    elif t["kind"] == "stale":
        what = f"{t['app']} went stale"
    lines = [f"decision seq {d['seq']}, policy {d['policy_version']}: {what}"]
    if "app" in d:
        a = d["app"]
        lines.append(f"app     {a['app']}: priority {a['priority']}, MinNum {a['min']}, MaxNum {a['max'] or '-'}")
        for r in d.get("ranges", []):
            mark = "  <- this one" if r["matched"] else ""
            lo, hi = r["metrical"]
            close = "]" if r is d["ranges"][-1] else ")"
            lines.append(f"        metrical [{lo:g}, {hi:g}{close}: {r['number']:+d}{mark}")
    apps = before.get("decider", {}).get("apps", [])
    if apps:
        lines.append(f"before  free {before['decider']['free']}; " + ", ".join(
            f"{x['app']} {x['instances']} (metrical {x['metrical']:g}{', idle' if x['idle'] else ''})" for x in apps))
    if "stale" in d:
        s = d["stale"]
        how = f"as if it reported {s['fallback_metrical']:g}" if s["on_stale"] == "fallback" else s["on_stale"]
        lines.append(f"stale   {s['app']}: no report for {s['silent_s']:g} s, stale_after_s {s['stale_after_s']:g}: "
                     f"handled {how}")
    if "stabilization" in d:
        w = d["stabilization"]
        reports = ", ".join(f"{n:+d} at {at}" for at, n in w["reports"])
        lines.append(f"window  scale_{w['direction']}_stabilization_s {w['window_s']:g}: Number {w['raw_number']:+d}"
                     f" -> {w['applied_number']:+d}; the window's reports (event time ms): {reports}")
    if d.get("mode") == "observe":
        lines.append("mode    observe-only: the moves below are what would move; instances did not change")
    lines.append(f"asked   {d['requested']:+d}, granted {d['granted']:+d}: {d['outcome']}")
    for name, moves in d["rounds"].items():
        lines.append(f"round   {name}: " + ", ".join(f"{m['from']} -> {m['to']} x{m['count']}" for m in moves))
    for donor, share in d["preemption_shares"].items():
        score = d["scores"].get(donor)
        lines.append(f"        {donor} gives {share['count']} ({share['share']:.0%} of the preemption)"
                     + (f", score {score:g}" if score is not None else ""))
    if after.get("decider"):
        lines.append(f"after   free {after['decider']['free']}; " + ", ".join(
            f"{x['app']} {x['instances']}" for x in after["decider"]["apps"]))
    lines.append(f"reason  {d['reason_code']}: {d['reason']}")
    return lines
