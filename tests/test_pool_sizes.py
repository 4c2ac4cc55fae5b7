"""A pool whose records would pass the size Kafka takes is refused where it is applied (issue 49), and the bounds it
is refused by hold for the records the core really writes."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.policy import DeciderPolicy, published
from streams import pool_sizes
from streams.clients import envelope
from streams.core import pools
from streams.core.pools.codec import dump_policies, dump_state
from streams.core.source import SourceRecord
from streams.decider import DeciderClient
from streams.settings import Settings
from tests.core.pools.builders import SEED_SPEC
from tests.helpers import tribunal


def policy(apps: int, **options: Any) -> dict[str, Any]:
    return {"kind": "decider", "version": "v1", "capacity": apps * 12, **options,
            "initial": {f"app{i:04d}": 10 for i in range(apps)},
            "apps": [{"App": f"app{i:04d}", "Priority": 1 + i % 10, "MinNum": 2, "Spec": SEED_SPEC,
                      **({"release": "eager"} if i % 7 == 0 else {})} for i in range(apps)]}


@pytest.mark.parametrize("options", [{}, {"decisions": "changes"}, {"preempted_cooldown_s": 30}])
def test_the_bounds_hold_for_every_record_the_core_writes(options: dict[str, Any]) -> None:
    model = DeciderPolicy.model_validate(policy(300, **options))
    bound = pool_sizes.bounds(model)
    raw = orjson.dumps(published(model))
    state, outputs = pools.apply(pools.PoolState(), SourceRecord(pools.POLICIES, 0, 0, 0, b"p", raw), pools.POLICIES)
    seen = {"policy record": len(raw), "policies entry": len(orjson.dumps(dump_policies(state))),
            "pool state": 0, "decision": 0}
    rng = random.Random(49)
    for i in range(600):
        seen["decision"] = max([seen["decision"], *(len(o.value_bytes()) for o in outputs
                                                    if o.stream == pools.SCALING_DECISIONS)])
        seen["pool state"] = max(seen["pool state"], len(orjson.dumps(dump_state(state))))
        value = envelope(f"app{rng.randrange(300):04d}", float(rng.choice([5, 50, 95, 99])), pools.PLUGIN_DECIDER)
        state, outputs = pools.apply(state, SourceRecord(pools.PLUGIN_DECIDER, 0, i, 1000 * i, b"p", value),
                                     pools.PLUGIN_DECIDER)
    assert all(seen[what] <= bound[what] for what in bound), (seen, bound)
    assert seen["decision"] > 1000 and seen["pool state"] > 1000  # the load made records of some size


def test_a_pool_too_large_for_a_record_is_refused_naming_the_limit() -> None:
    fits, too_many = DeciderPolicy.model_validate(policy(3000)), DeciderPolicy.model_validate(policy(4000))
    assert max(pool_sizes.check(fits).values()) <= pool_sizes.RECORD_LIMIT
    with pytest.raises(pool_sizes.RecordTooLarge) as refused:
        pool_sizes.check(too_many)
    assert "4,000 apps" in str(refused.value) and "1,048,576 bytes" in str(refused.value)
    assert "policies entry" in str(refused.value)


def test_policy_validate_and_apply_refuse_it_and_nothing_is_written(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps(policy(4000)))
    env = {"KAFKA_BOOTSTRAP": "127.0.0.1:9", "PATH": "/usr/bin:/bin"}  # nothing listens: a write would fail otherwise
    for args in (("pools", "policy", "validate", str(big)), ("pools", "policy", "apply", str(big), "--pool", "p")):
        done = tribunal(*args, env=env, check=False, timeout=60)
        assert done.returncode == 1 and "over the 1,048,576 bytes a record may take" in done.stderr, done.stderr
    small = tmp_path / "small.json"
    small.write_text(json.dumps(policy(10)))
    shown = tribunal("pools", "policy", "validate", str(small), env=env).stdout
    assert "its largest record at most" in shown and "of 1,048,576" in shown


def test_the_client_refuses_it_before_it_writes() -> None:
    client = DeciderClient(Settings(kafka_bootstrap="127.0.0.1:9"), "p")  # never started: no broker is asked
    with pytest.raises(pool_sizes.RecordTooLarge):
        asyncio.run(client.apply_policy(DeciderPolicy.model_validate(policy(4000))))


def test_a_pool_whose_whole_decisions_are_large_is_told_of_the_changes_form(tmp_path: Path) -> None:
    large, small = DeciderPolicy.model_validate(policy(1000)), DeciderPolicy.model_validate(policy(100))
    told = pool_sizes.advice(large)
    assert told is not None and "`decisions: changes`" in told and "1,000 apps" in told
    assert pool_sizes.bounds(large)["decision"] > pool_sizes.WHOLE_SHARE * pool_sizes.RECORD_LIMIT
    assert pool_sizes.advice(small) is None
    assert pool_sizes.advice(DeciderPolicy.model_validate(policy(1000, decisions="changes"))) is None
    path = tmp_path / "large.json"
    path.write_text(json.dumps(policy(1000)))
    done = tribunal("pools", "policy", "validate", str(path), env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.stdout.startswith("valid decider policy") and "advice:" in done.stderr
    assert "`decisions: changes`" in done.stderr
