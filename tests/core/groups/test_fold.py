"""Rejection limits against the seed's own figures (seed 001 §4.2 and §5) and SPEC §4."""

from __future__ import annotations

import json

import pytest

from schemas.groups import Alert, GroupHealth, JobOffers, RejectionLimit
from schemas.records import DeadLetter
from streams.core import groups
from streams.core.outputs import DLQ
from tests.core.groups.group_log import GroupLog, of, reloaded


@pytest.mark.parametrize(("K", "expected"), [(10, [3, 3, 4, 6, 11]), (12, [4, 4, 5, 7, 13]), (15, [4, 4, 6, 8, 16])])
def test_seed_table_4_2(K: int, expected: list[int]) -> None:
    log = GroupLog()
    for sid, n in zip("ABCDE", [1, 1, 2, 3, 4], strict=True):
        log.register(sid, n=n)
    log.jobs(K)
    assert [log.figures(sid)["N"] for sid in "ABCDE"] == expected
    assert [groups.limit(K, 5, n) for n in [1, 1, 2, 3, 4]] == expected


def test_seed_walkthrough_section_5() -> None:
    """§5: one scheduler, then two, then three; alarm when X > M, refuse when X >= N."""
    log = GroupLog()
    log.register("A", n=1, m=10)
    log.jobs(9)
    for i in range(9):
        log.acquire(f"j{i:03d}", "A")
    assert log.figures("A") == {"K": 9, "S": 1, "N": 10, "X": 9, "M": 10, "refuse": False, "alarm": False}
    log.jobs(1, start=9)
    log.acquire("j009", "A")
    assert log.figures("A") == {"K": 10, "S": 1, "N": 11, "X": 10, "M": 10, "refuse": False, "alarm": False}
    log.jobs(1, start=10)
    out = log.acquire("j010", "A")
    assert log.figures("A") == {"K": 11, "S": 1, "N": 12, "X": 11, "M": 10, "refuse": False, "alarm": True}
    [alert] = of(out, groups.ALERTS)
    assert (alert["kind"], alert["scheduler"], alert["X"], alert["M"]) == ("alarm", "A", 11, 10)

    log.register("B", n=1, m=8)
    assert log.figures("B") == {"K": 11, "S": 2, "N": 12, "X": 0, "M": 8, "refuse": False, "alarm": False}
    # §5.2 reached by adding jobs and balancing by hand: A holds 10, B 8, K = 18.
    log.jobs(7, start=11)
    for i in range(11, 18):
        log.acquire(f"j{i:03d}", "B")
    log.send("JobReleased", job="j000", scheduler="A")
    log.acquire("j000", "B")
    assert log.figures("A") == {"K": 18, "S": 2, "N": 19, "X": 10, "M": 10, "refuse": False, "alarm": False}
    assert log.figures("B") == {"K": 18, "S": 2, "N": 19, "X": 8, "M": 8, "refuse": False, "alarm": False}

    # §5.3: C joins with M = 4; N drops to 10 for everyone.
    out = log.register("C", n=1, m=4)
    log.jobs(1, start=18)
    log.acquire("j018", "B")
    assert {sid: log.figures(sid)["N"] for sid in "ABC"} == {"A": 10, "B": 10, "C": 10}
    assert log.figures("A")["refuse"] is True  # X = 10 >= N = 10: the seed's "A at most 10"
    assert log.figures("B")["alarm"] is True  # 9 > 8

    # §5.4 from there: K = 21 gives N = 11 for all three.
    log.jobs(2, start=19)
    assert {sid: log.figures(sid)["N"] for sid in "ABC"} == {"A": 11, "B": 11, "C": 11}
    assert log.figures("A")["refuse"] is False


def test_scheduler_loss_orphans_its_jobs_and_offers_them_least_loaded_first() -> None:
    log = GroupLog()
    for sid in "ABC":
        log.register(sid)
    log.jobs(6)
    for job, sid in zip([f"j{i:03d}" for i in range(6)], "AAABBC", strict=True):
        log.acquire(job, sid)
    out = log.send("SchedulerLost", scheduler="A")
    [health] = of(out, groups.GROUP_HEALTH)
    assert health["orphans"] == ["j000", "j001", "j002"]
    # B holds 2 and C 1; N = 1 + 6 // 1 = 7 for both: C, C (now 2 = B's), then B by id.
    assert health["offers"] == {"j000": "C", "j001": "B", "j002": "C"}
    [offers] = of(out, groups.JOB_OFFERS)
    assert offers["offers"] == health["offers"]
    [gone] = [r for r in of(out, groups.REJECTION_LIMITS) if r["scheduler"] == "A"]
    assert (gone["live"], gone["X"], gone["refuse"]) == (False, 0, True)
    # A release seen after the loss is stale and changes nothing.
    out = log.send("JobReleased", job="j000", scheduler="A")
    [health] = of(out, groups.GROUP_HEALTH)
    assert (health["applied"], health["orphans"]) == (False, ["j000", "j001", "j002"])


def test_release_before_loss_strands_nothing() -> None:
    """The seed's §6.2 failure: releases arrive before the loss, while S is stale; N comes back right."""
    log = GroupLog()
    for sid in "ABC":
        log.register(sid)
    log.jobs(9)
    for i in range(9):
        log.acquire(f"j{i:03d}", "ABC"[i % 3])
    for i in (0, 3, 6):
        log.send("JobReleased", job=f"j{i:03d}", scheduler="A")
    stale = of(log.send("SchedulerLost", scheduler="A"), groups.GROUP_HEALTH)[0]
    assert stale["offers"] == {"j000": "B", "j003": "C", "j006": "B"}
    for job, sid in stale["offers"].items():
        log.acquire(job, sid)
    assert not log.state.orphans
    assert {sid: log.figures(sid)["X"] for sid in "BC"} == {"B": 5, "C": 4}


def two_schedulers(jobs: int) -> GroupLog:
    """A and B registered, `jobs` jobs, the first held by A."""
    log = GroupLog()
    log.register("A")
    log.register("B")
    log.jobs(jobs)
    log.acquire("j000", "A")
    return log


def test_offline_scheduler_drains_and_gets_no_offers() -> None:
    log = two_schedulers(2)
    out = log.send("SchedulerOfflineRequested", scheduler="A")
    [rec] = of(out, groups.REJECTION_LIMITS)
    assert (rec["offline"], rec["drained"]) == (True, False)
    out = log.send("JobReleased", job="j000", scheduler="A")
    [rec] = of(out, groups.REJECTION_LIMITS)
    assert (rec["offline"], rec["drained"], rec["X"]) == (True, True, 0)
    assert of(out, groups.GROUP_HEALTH)[0]["offers"] == {"j000": "B", "j001": "B"}


def test_snapshot_corrects_what_the_log_missed() -> None:
    log = two_schedulers(3)
    snapshot = {"schedulers": [{"type": "SchedulerRegistered", "group": "g", "scheduler": "B", "address": "B:7000",
                                "fault_tolerance": 1, "alarm_threshold": 10}],
                "jobs": {"j000": None, "j001": "B", "j003": None}, "offline": []}
    out = log.send("MembershipSnapshot", **snapshot)
    [health] = of(out, groups.GROUP_HEALTH)
    fixes = [(c["event"]["type"], c["event"].get("scheduler"), c["event"].get("job")) for c in health["corrections"]]
    assert fixes == [("SchedulerLost", "A", None), ("JobDeleted", None, "j002"), ("JobAcquired", "B", "j001"),
                     ("JobCreated", None, "j003")]
    assert all(c["why"] for c in health["corrections"])
    assert (health["K"], health["S"], health["orphans"]) == (3, 1, ["j000", "j003"])
    # The same snapshot again agrees with the log.
    [health] = of(log.send("MembershipSnapshot", **snapshot), groups.GROUP_HEALTH)
    assert (health["applied"], health["corrections"]) == (False, [])


def test_n_changes_only_for_schedulers_whose_figures_change() -> None:
    log = GroupLog()
    log.register("A", n=1)
    log.register("B", n=1)
    log.register("C", n=2)
    out = log.send("JobCreated", job="j000")  # S - n: 2 and 1, so N = 1 + 1 // 2 = 1 and 1 + 1 = 2
    assert sorted(r["scheduler"] for r in of(out, groups.REJECTION_LIMITS)) == ["C"]
    out = log.send("JobCreated", job="j001")  # now 2 and 3: all three move
    assert sorted(r["scheduler"] for r in of(out, groups.REJECTION_LIMITS)) == ["A", "B", "C"]
    out = log.acquire("j000", "A")
    assert sorted(r["scheduler"] for r in of(out, groups.REJECTION_LIMITS)) == ["A"]


def test_capacity_alert_when_sum_n_falls_short() -> None:
    log = GroupLog()
    log.register("A", n=1)
    log.register("B", n=1)
    log.jobs(4)  # N = 5 each, 10 >= 4
    out = log.send("SchedulerOfflineRequested", scheduler="A")
    assert not of(out, groups.ALERTS)
    out = log.send("SchedulerOfflineRequested", scheduler="B")
    [alert] = of(out, groups.ALERTS)
    assert alert["kind"] == "capacity_short"
    [alert] = of(log.send("SchedulerOnlineRequested", scheduler="B"), groups.ALERTS)
    assert alert["kind"] == "capacity_restored"


@pytest.mark.parametrize(("topic", "value", "code"), [
    (groups.JOB_EVENTS, b"{", "bad_event"),
    (groups.JOB_EVENTS, b'{"type": "SchedulerLost", "group": "g", "scheduler": "A"}', "wrong_topic"),
    (groups.SCHEDULER_EVENTS, b'{"type": "SchedulerLost", "group": "other", "scheduler": "A"}', "group_mismatch"),
    (groups.SCHEDULER_EVENTS, b'{"type": "SchedulerRegistered", "group": "g", "scheduler": "A", "fault_tolerance": 0}',
     "bad_event"),
])
def test_bad_records_go_to_the_dead_letter_stream(topic: str, value: bytes, code: str) -> None:
    log = GroupLog()
    [out] = log.raw(topic, value)
    assert out.stream == DLQ
    assert DeadLetter.model_validate_json(out.value_bytes()).reason_code == code


def test_every_output_validates_and_numbers_per_key() -> None:
    log = GroupLog()
    log.register("A", m=1)
    log.register("B")
    log.jobs(4)
    for i in range(3):
        log.acquire(f"j{i:03d}", "A")
    log.send("SchedulerLost", scheduler="A")
    models = {groups.REJECTION_LIMITS: RejectionLimit, groups.GROUP_HEALTH: GroupHealth,
              groups.JOB_OFFERS: JobOffers, groups.ALERTS: Alert}
    seqs: dict[tuple[str, str], list[int]] = {}
    for emit in log.emitted:
        model = models[emit.stream]
        assert model.model_validate_json(emit.value_bytes()).model_dump(mode="json") == json.loads(emit.value_bytes())
        seqs.setdefault((emit.stream, emit.key), []).append(json.loads(emit.value_bytes())["seq"])
    assert all(s == list(range(1, len(s) + 1)) for s in seqs.values())
    assert {s for s, _ in seqs} == set(models)


def test_redelivered_record_yields_nothing_and_dump_load_round_trips() -> None:
    log = GroupLog()
    log.register("A")
    log.jobs(2)
    log.acquire("j000", "A")
    assert reloaded(log.state) == log.state
    record_state = log.state
    log.offsets[groups.JOB_EVENTS] -= 1  # the same offset again
    assert log.send("JobDeleted", job="j000") == []
    assert log.state == record_state


def test_a_snapshot_with_an_empty_owner_still_applies() -> None:
    """The bridge published `""` for an owner node without data: the fold raised, and the snapshot was lost."""
    log = GroupLog()
    log.register("A")
    [health] = of(log.send("MembershipSnapshot", schedulers=[], jobs={"j1": ""}), groups.GROUP_HEALTH)
    assert [c["event"]["type"] for c in health["corrections"]] == ["SchedulerLost", "JobCreated"]
    assert health["orphans"] == ["j1"] and health["K"] == 1 and health["S"] == 0
    [skipped] = health["skipped"]
    assert "j1" in skipped and "kept without an owner" in skipped
    assert "1 bad entry left out" in health["note"]
    GroupHealth.model_validate(health)


def test_a_snapshot_leaves_out_only_its_bad_entries() -> None:
    log = GroupLog()
    good = {"type": "SchedulerRegistered", "group": "g", "scheduler": "B", "address": "B:7000"}
    out = log.send("MembershipSnapshot", schedulers=[good, {"scheduler": "", "address": 5}, "C", good],
                   jobs={"j1": "B", "j2": None, "j3": 7}, offline=["", "B", None])
    [health] = of(out, groups.GROUP_HEALTH)
    assert health["S"] == 1 and health["K"] == 3 and health["orphans"] == ["j2", "j3"]
    assert log.state.offline == {"B"} and log.state.owners["j1"] == "B"
    assert [s.split(":")[0] for s in health["skipped"]] == \
        ["schedulers[1]", "schedulers[2]", "schedulers[3]", "jobs[j3]", "offline[0]", "offline[2]"]


def test_a_snapshot_without_a_job_map_is_dead_lettered_whole() -> None:
    """Leaving out the jobs would read as every job deleted, so such a snapshot is not applied at all."""
    log = GroupLog()
    log.jobs(2)
    [dead] = log.raw(groups.SCHEDULER_EVENTS, json.dumps({"type": "MembershipSnapshot", "group": "g",
                                                          "schedulers": []}).encode())
    assert dead.stream == DLQ and json.loads(dead.value_bytes())["reason_code"] == "bad_event"
    assert log.state.K == 2


def test_an_event_of_an_older_publisher_term_is_dead_lettered_and_changes_nothing() -> None:
    """The fence (SPEC §4): a bridge that lost its leadership without knowing publishes nothing over its successor's."""
    log = GroupLog()
    log.send("SchedulerRegistered", scheduler="A", publisher="old", term=5)
    log.send("SchedulerRegistered", scheduler="B", publisher="new", term=9)  # the successor, elected later
    before = log.state
    [dead] = log.send("SchedulerLost", scheduler="B", publisher="old", term=5)
    letter = json.loads(dead.value_bytes())
    assert dead.stream == DLQ and letter["reason_code"] == "stale_publisher", letter
    assert "term 5" in letter["reason"] and "term 9" in letter["reason"], letter
    assert (log.state.members, log.state.term) == (before.members, 9)
    # A whole stale snapshot (read before the successor's) is refused as well: B stays.
    [dead] = log.send("MembershipSnapshot", schedulers=[], jobs={}, publisher="old", term=8)
    assert json.loads(dead.value_bytes())["reason_code"] == "stale_publisher"
    assert sorted(log.state.members.keys()) == ["A", "B"]
    # Its own term again, a newer one, and events without a term (a script, a scheduler client) are applied.
    log.send("JobCreated", job="j1", publisher="new", term=9)
    log.send("JobCreated", job="j2")
    log.send("JobCreated", job="j3", publisher="newer", term=12)
    assert (log.state.K, log.state.term) == (3, 12)
    assert reloaded(log.state).term == 12


def test_a_snapshots_corrections_and_a_group_without_terms_read_as_before() -> None:
    """Logs written before publishers had terms fold to the same bytes: nothing of the fence shows in them."""
    log = GroupLog()
    log.register("A")
    assert "term" not in groups.dump(log.state)
    out = log.send("MembershipSnapshot", schedulers=[], jobs={"j1": None}, publisher="bridge", term=3)
    [health] = of(out, groups.GROUP_HEALTH)
    fixes = [c["event"] for c in health["corrections"]]
    assert [f["type"] for f in fixes] == ["SchedulerLost", "JobCreated"], fixes
    assert all(set(f) == {"type", "group", *({"scheduler"} if "scheduler" in f else {"job"})} for f in fixes), fixes
    assert groups.dump(log.state)["term"] == 3


def test_a_snapshot_whose_term_cannot_be_read_is_dead_lettered() -> None:
    log = GroupLog()
    [dead] = log.send("MembershipSnapshot", schedulers=[], jobs={}, term="soon")
    assert json.loads(dead.value_bytes())["reason_code"] == "bad_event"
