"""What the decider keeps so that a decision does not walk every app (issue 38) is what walking them would say,
after every record of any log."""

from __future__ import annotations

import heapq
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.core.pools import fold, grants
from streams.core.pools.verdicts import named_keys
from tests.core.pools.test_decider_properties import events, policies, run


@given(policies(), events)
def test_running_totals_and_changed_apps_match_a_full_walk(policy: dict[str, Any],
                                                            log_events: list[tuple[Any, ...]]) -> None:
    for before, after, d in run(policy, log_events):
        # `used` (behind `free`) is the sum of the instances, however they changed
        assert after.used == sum(after.instances.values()), d
        assert before.used == sum(before.instances.values())
        # the idle index holds exactly the apps whose metrical maps to a negative Number, each at its priority
        rules = after.policy.by_key
        assert after.idle_apps() == frozenset(k for k, m in after.metricals.items() if rules[k].number(m) < 0)
        assert all(rules[k].priority == p for p, level in enumerate(after.idle) for k in level), after.idle
        # the apps a decision's moves name are all whose instances changed (what `pool-instances` is written for)
        if before.policy is after.policy:
            named = named_keys(after.policy, d["moves"])
            assert fold._moved(before, after, named) == fold._changed(before, after.by_name()[0]), d


@given(st.lists(st.integers(1, 300), min_size=1, max_size=60), st.integers(1, 80), st.data())
def test_preemption_units_go_to_the_largest_weights_ties_to_the_smaller_position(
        weight: list[int], need: int, data: st.DataObject) -> None:
    open_ = sorted(data.draw(st.sets(st.integers(0, len(weight) - 1), min_size=1)))
    expected = [0] * len(open_)
    for _, n in heapq.nsmallest(need, [(-weight[i], n) for n, i in enumerate(open_)]):
        expected[n] = 1
    assert grants._units(need, weight, open_) == expected
