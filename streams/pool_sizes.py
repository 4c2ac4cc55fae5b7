"""How large a decider pool's records can get, and the refusal of a policy whose records would not fit (issue 49).

Kafka refuses a record above a size: the worker's producer sends none larger than `RECORD_LIMIT` (its
`max_request_size`, under the broker's default `message.max.bytes` of 1,048,588). A pool whose policy, state or
decisions would pass it must be refused where it is applied (`tribunal pools policy apply`,
`DeciderClient.apply_policy`) with the limit named, never found by a worker that cannot write what it decided.

Each bound is the bytes of a record built at its largest: every app named, every count at the capacity, every
metrical and score at the longest a float prints, every move and every name the reason can list. A pool's records
grow with its apps in four places:

* the policy record (`policies`), and the worker's table entry of the policies it folds under (with the pool's
  justice policy, if it has one: counted at 4 KB);
* the pool's state entry (every app's instances and metrical, and under time options each app's clocks);
* a decision: every app's instances, metrical and score in the whole form; in the `changes` form only those it
  changed, but a policy's first decision changes every app, and a preemption's moves and reason name each giver;
* not `pool-instances`: one record per app.

A stabilization window keeps an app's reports within the window, as many as arrive: that part of a timed pool's
state is not bounded here (a report a second in a 300 s window adds about 7 KB an app).
"""

from __future__ import annotations

from typing import Any

import orjson

from schemas.policy import DeciderPolicy, published
from streams.errors import ConfigError

RECORD_LIMIT = 1 << 20  # the worker's producer's max_request_size (`worker.app`): the largest record it sends
LONGEST_FLOAT = 33.333333333333336  # a metrical or score as long as a float prints (17 significant digits)
REASON_WORDS = 200  # the reason's own words beside the names it lists


WHOLE_SHARE = 0.1  # of the limit: whole decisions larger than this get the advice of the `changes` form


class RecordTooLarge(ConfigError):
    """A pool's records would pass the size Kafka takes: the policy is refused before it is applied."""


def bounds(policy: DeciderPolicy) -> dict[str, int]:
    """Bytes at most of each of the pool's records that grows with its apps, by name."""
    names = [a.App for a in policy.apps]
    longest = max(names, key=len)
    most = policy.capacity if policy.capacity is not None else sum(policy.starting_instances().values())
    apps = {n: most for n in names}
    floats = {n: LONGEST_FLOAT for n in names}
    growth = max((abs(s.Number) for a in policy.apps for s in a.Spec), default=0)
    movers = sorted(names, key=len, reverse=True)[:max(1, min(len(names), growth))]  # each move gives one or more
    move = [{"from": n, "to": longest, "count": most, "round": "preempt"} for n in movers]
    listed = sum(len(n) + 8 for n in names)
    decision = {
        "type": "ScalingDecision", "pool": "p" * 200, "seq": 1 << 62,
        "cause": {"topic": "t" * 249, "partition": 1 << 31, "offset": 1 << 62, "timestamp": 1 << 62,
                  "position": 1 << 62},
        "policy_version": policy.version, "trigger": {"kind": "metric", "app": longest,
                                                      "metrical": LONGEST_FLOAT, "capacity": most},
        "outcome": "partial", "requested": most, "granted": most, "moves": [*move, *move],  # idle, then preempt
        "instances": apps, "metricals": floats, "capacity": most, "free": most, "scores": floats,
        "reason_code": "partially_granted", "reason": "r" * (REASON_WORDS + 3 * listed),
        "scored": len(names), "score_sum": LONGEST_FLOAT * len(names)}
    state: dict[str, Any] = {"decider": {"version": policy.version, "capacity": most, "instances": apps,
                                         "metricals": floats}}
    if policy.timed():
        clocks = {n: 1 << 62 for n in names}
        state["decider"]["timing"] = {"now": 1 << 62, "started": clocks, "reported": clocks, "numbers": apps,
                                      "preempted": clocks, "stale": names}
    record = published(policy)
    justice = 4096  # a justice policy the pool may hold beside it, in the same entry (a driver and a few rules)
    return {"policy record": len(orjson.dumps(record)),
            "policies entry": len(orjson.dumps({"decider": record, "justice": "j" * justice})),
            "pool state": len(orjson.dumps(state)), "decision": len(orjson.dumps(decision))}


def check(policy: DeciderPolicy, limit: int = RECORD_LIMIT) -> dict[str, int]:
    """`bounds(policy)`, or `RecordTooLarge` naming the records that would pass `limit` and the limit."""
    found = bounds(policy)
    over = {what: size for what, size in found.items() if size > limit}
    if over:
        told = ", ".join(f"its {what} up to {size:,} bytes" for what, size in over.items())
        raise RecordTooLarge(
            f"decider policy {policy.version} ({len(policy.apps):,} apps) refused: {told}, over the {limit:,} bytes a "
            f"record may take (the worker's producer's max_request_size, under Kafka's default message.max.bytes "
            f"of 1,048,588). Split the pool, or shorten its apps' names and ranges")
    return found


def advice(policy: DeciderPolicy, limit: int = RECORD_LIMIT) -> str | None:
    """What to tell the owner of a pool whose whole decisions may pass `WHOLE_SHARE` of `limit` (None: nothing).

    Such a pool fits, but every decision writes every app: at 1,000 apps encoding a whole decision was 0.06 of the
    rate at 10 apps, against 0.57 for the `changes` form (bench/core_fold.py, issue 49), and each one crosses the
    network and the changelog whole."""
    if policy.decisions == "changes":
        return None
    size = bounds(policy)["decision"]
    if size <= WHOLE_SHARE * limit:
        return None
    return (f"decider policy {policy.version} ({len(policy.apps):,} apps): its whole decisions may take up to "
            f"{size:,} bytes, more than {WHOLE_SHARE:.0%} of the {limit:,} a record may take; with "
            f"`decisions: changes` each decision carries only the apps it changed")
