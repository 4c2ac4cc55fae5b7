"""What the decider keeps so that a decision does not walk every app (issue 38) is what walking them would say,
after every record of any log."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from streams.core.pools import fold
from tests.core.pools.test_decider_properties import events, policies, run


@given(policies(), events)
def test_running_totals_and_changed_apps_match_a_full_walk(policy: dict[str, Any],
                                                            log_events: list[tuple[Any, ...]]) -> None:
    for before, after, d in run(policy, log_events):
        # `used` (behind `free`) is the sum of the instances, however they changed
        assert after.used == sum(after.instances.values()), d
        assert before.used == sum(before.instances.values())
        # the idle index holds exactly the apps whose metrical maps to a negative Number
        assert after.idle == frozenset(k for k, m in after.metricals.items() if after.policy.by_key[k].number(m) < 0)
        # the apps a decision's moves name are all whose instances changed (what `pool-instances` is written for)
        if before.policy is after.policy:
            assert fold._moved(before, after, tuple(d["moves"])) == fold._changed(before, after.by_name()[0]), d
