"""Integers in records are 64-bit: a larger one is invalid input (found by tests/worker/test_fuzz.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from schemas.cluster import PoolCapacitySet
from schemas.common import INT64_MAX, INT64_MIN
from schemas.groups import SchedulerRegistered
from schemas.policy import DeciderPolicy
from tests.core.pools.builders import seed_policy


@pytest.mark.parametrize("value", [INT64_MAX + 1, 10**40])
def test_an_integer_past_64_bits_is_refused_with_its_field(value: int) -> None:
    with pytest.raises(ValidationError, match="capacity: an integer outside the signed 64-bit range"):
        PoolCapacitySet.model_validate_json(f'{{"type": "PoolCapacitySet", "capacity": {value}}}')


def test_the_largest_64_bit_integer_is_accepted() -> None:
    assert PoolCapacitySet.model_validate_json(f'{{"type": "PoolCapacitySet", "capacity": {INT64_MAX}}}').capacity \
        == INT64_MAX


def test_nested_and_mapped_integers_are_checked_too() -> None:
    with pytest.raises(ValidationError, match="initial"):
        DeciderPolicy.model_validate({**seed_policy(), "initial": {"ats": 10**30, "hadoop": 5}})
    apps = seed_policy()["apps"]
    apps[0] = {**apps[0], "Spec": [{"Metrical": [0, 100], "Number": INT64_MIN - 1}]}
    with pytest.raises(ValidationError, match="Number"):
        DeciderPolicy.model_validate({**seed_policy(), "apps": apps})
    with pytest.raises(ValidationError, match="alarm_threshold"):
        SchedulerRegistered.model_validate({"type": "SchedulerRegistered", "group": "g", "scheduler": "s",
                                            "address": "s:1", "alarm_threshold": 2**64})
