"""Building records for core tests: policies, metric envelopes and source records."""

from __future__ import annotations

import json
from typing import Any

from streams.clients import envelope
from streams.core import pools
from streams.core.outputs import Emit
from streams.core.pools.ranks import Ranks
from streams.core.source import SourceRecord

SEED_SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -5},
             {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 5},
             {"Metrical": [80, 100], "Number": 10}]


def app(name: str, priority: int, min_num: int, **extra: Any) -> dict[str, Any]:
    return {"App": name, "Priority": priority, "MinNum": min_num, "Spec": SEED_SPEC, **extra}


def seed_policy() -> dict[str, Any]:
    """The seed's worked example: capacity 10, ats P1 MinNum 3, hadoop P2 MinNum 2, 5 and 5."""
    return {"kind": "decider", "version": "v3", "capacity": 10, "initial": {"ats": 5, "hadoop": 5},
            "apps": [app("ats", 1, 3), app("hadoop", 2, 2)]}


class Log:
    """An in-memory log of one pool, folded through `pools.apply` as the agents would.

    `feed` returns the outputs but `pool-instances`, which it keeps as the compacted topic would (`desired`), and
    checks after every record that they are what the decider holds, and that a `decisions: changes` pool's ranks
    are what building them afresh gives: every test of the pool fold checks both."""

    def __init__(self, key: bytes | None = b"pool-a") -> None:
        self.key = key
        self.state = pools.PoolState()
        self.offsets: dict[str, int] = {}
        self.desired: dict[str, dict[str, Any]] = {}  # app -> its latest PoolInstances

    def feed(self, topic: str, value: bytes, at: int | None = None) -> list[Emit]:
        """One record; `at` is its timestamp (event time, ms), else a time that grows with its topic's offset."""
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        record = SourceRecord(topic, 0, offset, 1_732_200_000_000 + offset if at is None else at, self.key, value)
        self.state, outputs = pools.apply(self.state, record, topic)
        decided: dict[str, Any] | None = None
        for out in outputs:
            if out.stream == pools.SCALING_DECISIONS:
                decided = json.loads(out.value_bytes())
            elif out.stream == pools.POOL_INSTANCES:  # each follows the decision that set it
                value = json.loads(out.value_bytes())
                assert decided is not None and (value["seq"], value["cause"]) == (decided["seq"], decided["cause"])
                assert value["instances"] == decided["instances"].get(value["app"], 0)
                assert out.key == f"{value['pool']}/{value['app']}"
                self.desired[value["app"]] = value
        if self.state.decider is not None:
            d = self.state.decider
            if d.ranks is not None:  # what a changes-form pool keeps in order is what building it afresh gives
                assert d.ranks == Ranks.of(d.policy, d.instances, d.metricals, d.timing), d.ranks
            held = {app: v["instances"] for app, v in self.desired.items() if v["instances"] or app in
                    self.state.decider.by_name()[0]}
            assert held == dict(self.state.decider.by_name()[0]), (held, self.state.decider.by_name()[0])
        return [out for out in outputs if out.stream != pools.POOL_INSTANCES]

    def policy(self, policy: dict[str, Any], at: int | None = None) -> list[Emit]:
        return self.feed(pools.POLICIES, json.dumps(policy).encode(), at)

    def metric(self, app_name: str, metrical: float, channel: str = pools.PLUGIN_DECIDER,
               at: int | None = None) -> list[Emit]:
        return self.feed(channel, envelope(app_name, metrical, channel), at)

    def event(self, event: dict[str, Any], at: int | None = None) -> list[Emit]:
        return self.feed(pools.CLUSTER_EVENTS, json.dumps(event).encode(), at)


def decision(outputs: list[Emit]) -> dict[str, Any]:
    [out] = outputs
    assert out.stream == pools.SCALING_DECISIONS, out
    result: dict[str, Any] = json.loads(out.value_bytes())
    return result


def decisions(outputs: list[Emit]) -> list[dict[str, Any]]:
    """Every decision among `outputs` (a record can cause several: apps gone stale, then its own)."""
    assert all(out.stream == pools.SCALING_DECISIONS for out in outputs), outputs
    return [json.loads(out.value_bytes()) for out in outputs]
