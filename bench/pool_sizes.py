"""The largest decider pool tribunal takes, and its records' real sizes against the bounds it is refused by (issue 49).

For a pool of apps like the benches' (names `app0000`, five ranges each, priorities 1-10), it finds the most apps a
policy may have before `tribunal pools policy apply` refuses it (`streams.pool_sizes`: its policy record, state entry or
a decision could pass the 1 MiB a record may take), then folds that pool through the core under a load of
random reports in both forms of decision and prints the largest record of each kind it really wrote beside its
bound. Run: `.venv/bin/python bench/pool_sizes.py [--records 3000]`.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core_fold import policy  # type: ignore[import-not-found]
from machine import describe  # type: ignore[import-not-found]

from schemas.policy import DeciderPolicy, published
from streams import pool_sizes
from streams.clients import envelope
from streams.core import pools
from streams.core.pools.codec import dump_policies, dump_state
from streams.core.source import SourceRecord


def accepted(apps: int) -> bool:
    try:
        pool_sizes.check(DeciderPolicy.model_validate(policy(apps)))
    except pool_sizes.RecordTooLarge:
        return False
    return True


def largest_accepted() -> int:
    low, high = 1, 2
    while accepted(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if accepted(mid) else (low, mid)
    return low


def real_sizes(apps: int, records: int, form: str) -> dict[str, int]:
    """The largest of each record the core wrote for the pool under `records` random reports."""
    raw = orjson.dumps(published(DeciderPolicy.model_validate(policy(apps, form))))  # as `pools policy apply` writes it
    state, outputs = pools.apply(pools.PoolState(), SourceRecord(pools.POLICIES, 0, 0, 0, b"p", raw), pools.POLICIES)
    sizes = {"policy record": len(raw), "policies entry": len(orjson.dumps(dump_policies(state))), "pool state": 0,
             "decision": 0}
    rng = random.Random(49)
    for i in range(records):
        sizes["decision"] = max([sizes["decision"], *(len(o.value_bytes()) for o in outputs
                                                      if o.stream == pools.SCALING_DECISIONS)])
        sizes["pool state"] = max(sizes["pool state"], len(orjson.dumps(dump_state(state))))  # as Faust writes it
        value = envelope(f"app{rng.randrange(apps):04d}", float(rng.randrange(101)), pools.PLUGIN_DECIDER)
        state, outputs = pools.apply(state, SourceRecord(pools.PLUGIN_DECIDER, 0, i, i, b"p", value),
                                     pools.PLUGIN_DECIDER)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3000, help="random reports folded for the real sizes")
    args = parser.parse_args()
    print(describe())
    most = largest_accepted()
    print(f"largest pool accepted: {most:,} apps (one more is refused); record limit {pool_sizes.RECORD_LIMIT:,} bytes")
    for form in ("whole", "changes"):
        bound = pool_sizes.bounds(DeciderPolicy.model_validate(policy(most, form)))
        real = real_sizes(most, args.records, form)
        print(f"{form:>8}: " + "; ".join(f"{what} {real[what]:,} (bound {bound[what]:,})" for what in bound))


if __name__ == "__main__":
    main()
