"""Fold rate of the pure core: metric records per second, one process, for 10 / 100 / 1,000 apps.

Three measures per pool size, each over the same generated log (seeded, so runs compare):
  decide   `decider.on_metric` on already-parsed (app, metrical) pairs: the decision logic alone;
  fold     `pools.apply` on raw envelope bytes: validation, decision, the ScalingDecision record;
  encode   fold plus the record's canonical JSON bytes: everything a worker does but Kafka I/O.
Each under both forms of decision (SPEC §2, issue 49): `whole` (every app in every decision, the default) and
`changes` (a policy with `decisions: changes`: what each decision changed), and for each form the ratio of its
encode rate at 1,000 apps to its rate at 10 (issue 49's goal: at least 0.5).
Each pool is timed running: after `--warm` reports per app (20), untimed. Rates are medians of --repeat runs,
under the collector settings the worker folds with (`gc_settings`).
Run: `.venv/bin/python bench/core_fold.py [--records N] [--forms whole]`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from machine import describe  # type: ignore[import-not-found]

from streams.clients import envelope
from streams.core import pools
from streams.core.pools import decider
from streams.core.source import SourceRecord
from streams.gc_settings import fewer_collections

SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -5},
        {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 5},
        {"Metrical": [80, 100], "Number": 10}]


def policy(apps: int, form: str = "whole") -> dict[str, Any]:
    return {"kind": "decider", "version": "bench", "capacity": apps * 12, "decisions": form,
            "initial": {f"app{i:04d}": 10 for i in range(apps)},
            "apps": [{"App": f"app{i:04d}", "Priority": 1 + i % 10, "MinNum": 2, "Spec": SPEC} for i in range(apps)]}


def log(apps: int, records: int, seed: int = 7) -> list[tuple[str, float]]:
    rng = random.Random(seed)
    return [(f"app{rng.randrange(apps):04d}", float(rng.randrange(101))) for _ in range(records)]


def start(apps: int, form: str) -> pools.PoolState:
    record = SourceRecord(pools.POLICIES, 0, 0, 0, b"bench", json.dumps(policy(apps, form)).encode())
    state, _ = pools.apply(pools.PoolState(), record, pools.POLICIES)
    return state


def warmed(apps: int, form: str, reports: int) -> pools.PoolState:
    """The pool after `reports` reports per app (untimed), so that every size is timed running, not starting: a
    new pool grows from free capacity into a full one, and at 1,000 apps that start would be all of its timed
    log (`--warm 0` times it)."""
    state = start(apps, form)
    for i, (name, value) in enumerate(log(apps, apps * reports, seed=8)):
        record = SourceRecord(pools.PLUGIN_DECIDER, 0, i, i, b"bench", envelope(name, value, pools.PLUGIN_DECIDER))
        state, _ = pools.apply(state, record, pools.PLUGIN_DECIDER)
    return state


def measure(apps: int, records: int, repeat: int, form: str, warm: int) -> tuple[float, float, float]:
    """Records a second, median of `repeat` runs of each measure (this machine's neighbours make single runs
    noisy)."""
    initial = warmed(apps, form, warm)
    runs = [_once(apps, records, initial) for _ in range(repeat)]
    return tuple(records / statistics.median(r[i] for r in runs) for i in range(3))  # type: ignore[return-value]


def _once(apps: int, records: int, initial: pools.PoolState) -> tuple[float, float, float]:
    metrics = log(apps, records)

    state = initial.decider
    assert state is not None
    t = time.perf_counter()
    for name, value in metrics:
        state, _ = decider.on_metric(state, name, value)
    decide = time.perf_counter() - t

    first = max(initial.offsets.values()) + 1  # after the warm-up's offsets, or they are taken for redeliveries
    raw = [SourceRecord(pools.PLUGIN_DECIDER, 0, first + i, first + i, b"bench",
                        envelope(n, v, pools.PLUGIN_DECIDER)) for i, (n, v) in enumerate(metrics)]
    s = initial
    t = time.perf_counter()
    for record in raw:
        s, _ = pools.apply(s, record, pools.PLUGIN_DECIDER)
    fold = time.perf_counter() - t

    s = initial
    t = time.perf_counter()
    for record in raw:
        s, outputs = pools.apply(s, record, pools.PLUGIN_DECIDER)
        for out in outputs:
            out.value_bytes()
    encode = time.perf_counter() - t
    return decide, fold, encode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000, help="records per pool size (1,000 apps: /10)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--forms", default="whole,changes", help="the forms of decision measured, comma-separated")
    parser.add_argument("--warm", type=int, default=20, help="reports per app folded before the timing")
    args = parser.parse_args()
    fewer_collections()  # as the worker and replay run the folds
    print(describe())
    print(f"each pool timed after {args.warm} reports per app")
    print(f"{'form':>8} {'apps':>6} {'records':>9} {'decide/s':>10} {'fold/s':>10} {'encode/s':>10}")
    for form in args.forms.split(","):
        encodes = {}
        for apps in (10, 100, 1000):
            records = args.records if apps < 1000 else max(1000, args.records // 10)
            decide, fold, encode = measure(apps, records, args.repeat, form, args.warm)
            encodes[apps] = encode
            print(f"{form:>8} {apps:>6} {records:>9} {decide:>10,.0f} {fold:>10,.0f} {encode:>10,.0f}")
        print(f"{form:>8} encode/s at 1,000 apps / at 10 apps: {encodes[1000] / encodes[10]:.2f}")


if __name__ == "__main__":
    main()
