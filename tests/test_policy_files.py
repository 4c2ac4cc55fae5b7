"""Policy documents: the seed's files load as written; every error is reported, naming app and range."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.policy import range_problems
from streams.policy_files import PolicyInvalid, load, validate
from tests.core.pools.builders import app, seed_policy
from tests.helpers import tribunal

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


POLICIES = sorted(p.name for p in EXAMPLES.iterdir() if p.name.startswith(("decider-", "justice-")))


def test_every_example_is_a_policy_or_the_keda_scaledobject() -> None:
    assert {p.name for p in EXAMPLES.iterdir()} - set(POLICIES) == {"keda-scaledobject.yaml"}  # (tests/decider)


@pytest.mark.parametrize("name", POLICIES)
def test_every_example_including_the_seeds_documents_loads(name: str) -> None:
    policy = load(EXAMPLES / name)
    assert policy.version


def test_seed_documents_have_trailing_commas_and_still_load() -> None:
    text = (EXAMPLES / "decider-three-apps.json").read_text()
    assert ",\n    }" in text or ",\n            }" in text
    policy = load(EXAMPLES / "decider-three-apps.json", version="seed")
    assert [a.App for a in policy.apps] == ["ats", "hadoop", "redis"]  # type: ignore[union-attr]


def _problems(record: dict[str, object]) -> list[str]:
    with pytest.raises(PolicyInvalid) as caught:
        validate(record)
    return caught.value.problems


def test_errors_name_the_app_and_the_range_and_come_all_at_once() -> None:
    bad_ats = app("ats", 1, 3, Spec=[{"Metrical": [0, 50], "Number": 0}, {"Metrical": [40, 90], "Number": 5}])
    bad_hadoop = app("hadoop", 12, 2)
    problems = _problems({**seed_policy(), "apps": [bad_ats, bad_hadoop]})
    assert len(problems) == 2
    assert "app 'ats'" in problems[0] and "[40, 90) overlaps [0, 50)" in problems[0]
    assert "gap: [90, 100] is not covered" in problems[0]
    assert problems[1].startswith("apps[1] (hadoop).Priority")


@pytest.mark.parametrize(("spec", "expected"), [
    ([{"Metrical": [0, 40], "Number": 0}, {"Metrical": [50, 100], "Number": 1}], "gap between [0, 40) and [50, 100]"),
    ([{"Metrical": [0, 60], "Number": 0}, {"Metrical": [50, 100], "Number": 1}], "overlaps"),
    ([{"Metrical": [10, 100], "Number": 0}], "gap: [0, 10) is not covered"),
    ([{"Metrical": [0, 120], "Number": 0}], "not within [0, 100]"),
    ([{"Metrical": [0, 50], "Number": 0}, {"Metrical": [50, 50], "Number": 1}, {"Metrical": [50, 100], "Number": 1}],
     "not within [0, 100] with low < high"),
])
def test_overlaps_gaps_and_bad_bounds_are_rejected(spec: list[dict[str, object]], expected: str) -> None:
    [problem] = _problems({**seed_policy(), "apps": [app("ats", 1, 3, Spec=spec), app("hadoop", 2, 2)]})
    assert expected in problem and "'ats'" in problem


def test_inconsistent_pool_figures_are_rejected() -> None:
    problems = _problems({**seed_policy(), "capacity": 4})
    assert any("below the sum of MinNum" in p for p in problems)
    problems = _problems({**seed_policy(), "initial": {"ats": 2, "mysql": 1}})
    assert any("'ats' starts at 2" in p for p in problems) and any("'mysql' is not an app" in p for p in problems)
    problems = _problems({**seed_policy(), "apps": [app("ats", 1, 3), app("ATS", 2, 2)]})
    assert any("appears twice" in p for p in problems)


@given(st.lists(st.tuples(st.integers(-5, 105), st.integers(-5, 105)), min_size=1, max_size=6))
def test_range_check_accepts_exactly_the_partitions_of_0_to_100(bounds: list[tuple[int, int]]) -> None:
    ordered = sorted(bounds)
    is_partition = (ordered[0][0] == 0 and ordered[-1][1] == 100 and all(lo < hi for lo, hi in ordered)
                    and all(a[1] == b[0] for a, b in itertools.pairwise(ordered)))
    assert (range_problems([(float(a), float(b)) for a, b in bounds], must_cover=True) == []) == is_partition


def test_policy_validate_cli(tmp_path: Path) -> None:
    ok = tribunal("pools", "policy", "validate", str(EXAMPLES / "decider-pool-a.yaml"))
    assert ok.stdout.startswith("valid decider policy v3: 2 apps") and ok.stdout.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: decider\nversion: x\napps:\n - {App: a, Priority: 0, MinNum: -1, Spec: []}\n")
    result = tribunal("pools", "policy", "validate", str(bad), check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith(f"{bad}: apps[0] (a).") for line in lines)


OPTIONS = {"observe_only": True, "max_moves_per_decision": 3, "preempted_cooldown_s": 120}
APP_OPTIONS = [{"scale_down_stabilization_s": 300, "scale_up_stabilization_s": 15.5},
               {"stale_after_s": 60, "on_stale": "idle"}, {"stale_after_s": 60, "on_stale": "hold"},
               {"stale_after_s": 90, "on_stale": {"fallback_metrical": 35}}, {"stale_after_s": 60}]


@pytest.mark.parametrize("extra", APP_OPTIONS)
def test_every_optional_field_round_trips_through_validation(extra: dict[str, object]) -> None:
    record = {**seed_policy(), **OPTIONS, "apps": [app("ats", 1, 3, **extra), app("hadoop", 2, 2)]}
    policy = validate(record)
    again = validate(policy.model_dump(mode="json"))
    assert again == policy and again.timed()  # type: ignore[union-attr]
    dumped = again.model_dump(mode="json")
    assert {k: dumped[k] for k in OPTIONS} == OPTIONS and {k: dumped["apps"][0][k] for k in extra} == extra


def test_a_policy_without_the_options_is_not_timed_and_its_summary_names_them_when_set() -> None:
    plain = validate(seed_policy())
    assert not plain.timed()  # type: ignore[union-attr]
    from streams.policy_files import summary

    options, size = summary(plain).split("starting at")[1].split("; its largest record at most ")
    assert ";" not in options and size.endswith(" bytes of 1,048,576"), size
    record = {**seed_policy(), **OPTIONS, "decisions": "changes", "apps": [app("ats", 1, 3, **APP_OPTIONS[0]),
                                                                           app("hadoop", 2, 2, **APP_OPTIONS[3])]}
    text = summary(validate(record))
    for part in ("observe-only", "at most 3 instances", "spared for 120 s", "ats stabilized up 15.5 s, down 300 s",
                 "hadoop stale after 90 s: as if it reported 35", "decisions carry what they changed"):
        assert part in text, text


def test_bad_optional_fields_are_named_all_at_once() -> None:
    bad = app("ats", 1, 3, on_stale="later", scale_down_stabilization_s=0)
    worse = app("hadoop", 2, 2, on_stale="idle")
    problems = _problems({**seed_policy(), "apps": [bad, worse], "max_moves_per_decision": 0,
                          "preempted_cooldown_s": -1, "observe_only": "maybe"})
    assert problems == [
        "apps[0] (ats).scale_down_stabilization_s: Input should be greater than or equal to 0.001",
        "apps[0] (ats).on_stale: on_stale must be hold, idle or {fallback_metrical: N} with N in [0, 100], "
        "not 'later'",
        "apps[1] (hadoop): app 'hadoop': on_stale needs stale_after_s (how long without a report makes the app "
        "stale)",
        "observe_only: Input should be a valid boolean, unable to interpret input",
        "max_moves_per_decision: Input should be greater than or equal to 1",
        "preempted_cooldown_s: Input should be greater than or equal to 0.001",
    ]
