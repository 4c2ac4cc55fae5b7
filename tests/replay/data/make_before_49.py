"""How `decisions-before-49.inputs.jsonl` was made (issue 49): a mixed log of three pools, every kind of decision
(free, idle donors, preemption among many candidates, eager release, MaxNum, a capacity drop, observed instances,
a new policy dropping an app, an observe-only pool). Its outputs, `decisions-before-49.outputs.jsonl`, were
written by `tribunal audit replay` on the tree before decisions could carry only what changed; the test replays the
inputs on today's tree and compares the bytes. Run again only to make a new fixture, never to refresh this one."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
APPS = ["ats", "Hadoop", "redis", "spark", "flink", "kafka"]


def spec() -> list[dict[str, Any]]:
    return [{"Metrical": [0, 20], "Number": -2}, {"Metrical": [20, 40], "Number": -1},
            {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 2},
            {"Metrical": [80, 100], "Number": 4}]


def policy(version: str, apps: list[str], **extra: Any) -> dict[str, Any]:
    return {"kind": "decider", "version": version, "capacity": 40, **extra,
            "apps": [{"App": a, "Priority": 1 + i % 4, "MinNum": 1 + i % 2, "Spec": spec(),
                      **({"release": "eager"} if a == "spark" else {}), **({"MaxNum": 12} if a == "redis" else {})}
                     for i, a in enumerate(apps)]}


def main() -> None:
    rng = random.Random(49)
    offsets: dict[str, int] = {}
    lines: list[str] = []

    def add(topic: str, key: str, value: Any) -> None:
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        lines.append(json.dumps({"topic": topic, "partition": 0, "offset": offset,
                                 "timestamp": 1_732_200_000_000 + 10 * len(lines), "key": key, "value": value}))

    add("policies", "pool-a", policy("a1", APPS))
    add("policies", "pool-b", policy("b1", APPS[:4]))
    add("policies", "pool-c", policy("c1", APPS, observe_only=True))
    for i in range(240):
        pool = rng.choice(["pool-a", "pool-a", "pool-b", "pool-c"])
        apps = APPS[:4] if pool == "pool-b" else APPS
        body = json.dumps({"App": rng.choice(apps), "Metrical": rng.choice([5, 15, 25, 35, 50, 65, 75, 85, 95, 99])})
        add("plugin_decider", pool, {"Command": "app-metrical", "Channel": "plugin_decider", "Body": body})
        if i == 80:
            add("cluster-events", "pool-a", {"type": "PoolCapacitySet", "capacity": 30})
        if i == 120:
            add("cluster-events", "pool-a", {"type": "InstancesObserved", "instances": {"ats": 3, "redis": 2}})
        if i == 160:
            add("policies", "pool-a", policy("a2", [a for a in APPS if a != "flink"]))
    (HERE / "decisions-before-49.inputs.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
