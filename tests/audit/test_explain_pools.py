"""`explain` on a pool whose decisions carry what they changed (issue 49): it shows the whole picture again."""

from __future__ import annotations

import json

from streams.audit.explain import explanations
from streams.clients import envelope
from streams.core import pools
from streams.core.source import SourceRecord
from streams.settings import Settings
from tests.audit.test_jobs import decided
from tests.core.pools.builders import app

ONE_MORE = [{"Metrical": [0, 50], "Number": 0}, {"Metrical": [50, 100], "Number": 1}]


def test_explain_folds_a_changes_decision_again_as_a_whole_one() -> None:
    policy = {"kind": "decider", "version": "v1", "capacity": 12, "decisions": "changes",
              "initial": {"ats": 3, "hadoop": 3, "redis": 3, "spark": 3},
              "apps": [{"App": "ats", "Priority": 1, "MinNum": 1, "Spec": ONE_MORE}, app("hadoop", 2, 1),
                       app("redis", 3, 1), app("spark", 3, 1)]}
    inputs = [SourceRecord(pools.POLICIES, 0, 0, 1, b"p", json.dumps(policy).encode()),
              SourceRecord(pools.PLUGIN_DECIDER, 0, 0, 2, b"p", envelope("ats", 95, pools.PLUGIN_DECIDER))]
    [_, found] = list(explanations(decided(inputs, list(pools.INPUTS)), Settings(), lambda r: True))
    recorded = next(o for o in found["outputs"] if o["type"] == "ScalingDecision")
    [giver] = recorded["scores"]  # one instance wanted: one candidate of three gives it
    assert (recorded["form"], recorded["scored"]) == ("changes", 3)
    assert recorded["instances"] == {"ats": 4, giver: 2}
    shown = found["decision"]  # as a whole decision states it
    assert shown["instances_after"] == {"ats": 4, "hadoop": 3, "redis": 3, "spark": 3, giver: 2}
    assert set(shown["scores"]) == {"hadoop", "redis", "spark"}
    assert sum(shown["scores"].values()) == recorded["score_sum"]
