"""The decider and justice on the real broker, with the worker as a separate process."""

from __future__ import annotations

import asyncio
import json
import random
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from streams.clients import envelope
from tests.core.pools.builders import seed_policy
from tests.core.pools.test_justice import justice_policy
from tests.helpers import Service, Worker, end_offsets, produce_all, read_committed, tribunal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def decisions(kafka: str, unique: str, expected: int) -> list[dict[str, object]]:
    return [json.loads(r.value) for r in decision_records(kafka, unique, expected)]


def decision_records(kafka: str, unique: str, expected: int) -> list[Any]:
    return asyncio.run(read_committed(kafka, f"{unique}.scaling-decisions", expected))


def test_the_seeds_worked_example_sent_with_tribunal_metric(kafka: str, unique: str, worker: Worker,
                                                            worker_env: dict[str, str]) -> None:
    tribunal("pools", "policy", "apply", str(EXAMPLES / "decider-pool-a.yaml"), "--pool", "pool-a", env=worker_env)
    # The policy is decided before any metric is sent: it applies to the records after it.
    assert decisions(kafka, unique, 1)[0]["outcome"] == "policy", worker.log()[-3000:]
    for app, value in [("ats", "55"), ("hadoop", "70"), ("ats", "75"), ("ats", "30"), ("Hadoop", "90")]:
        tribunal("pools", "metric", app, value, "--pool", "pool-a", env=worker_env)

    got = decisions(kafka, unique, 6)
    assert [(d["seq"], d["outcome"], d["instances"]) for d in got] == [
        (1, "policy", {"ats": 5, "hadoop": 5}), (2, "steady", {"ats": 5, "hadoop": 5}),
        (3, "rejected", {"ats": 5, "hadoop": 5}), (4, "partial", {"ats": 8, "hadoop": 2}),
        (5, "idle", {"ats": 8, "hadoop": 2}), (6, "partial", {"ats": 3, "hadoop": 7})]
    assert got[5]["moves"] == [{"from": "ats", "to": "hadoop", "count": 5, "round": "idle"}]
    assert all(d["cause"]["topic"] == f"{unique}.plugin_decider" for d in got[1:])

    state = tribunal("pools", "state", "--pool", "pool-a", "--json", env=worker_env)
    apps = {a["app"]: a["instances"] for a in json.loads(state.stdout)["decider"]["apps"]}
    assert apps == {"ats": 3, "hadoop": 7}

    # Written inside transactions: the partition also holds commit markers, so its end offset runs
    # past the records it carries (a plain producer's would equal them).
    ends = asyncio.run(end_offsets(kafka, f"{unique}.scaling-decisions"))
    partition = {r.partition for r in decision_records(kafka, unique, 6)}
    assert len(partition) == 1 and ends[partition.pop()] > len(got), ends
    assert worker.alive


MALFORMED = {  # reason code -> (input topic, key, value)
    "bad_envelope": ("plugin_decider", b"pool-m", b"{not json"),
    "empty_value": ("plugin_decider", b"pool-m", None),
    "unknown_command": ("plugin_decider", b"pool-m",
                        json.dumps({"Command": "app-kill", "Channel": "plugin_decider", "Body": "{}"}).encode()),
    "wrong_channel": ("plugin_decider", b"pool-m", envelope("ats", 50, "plugin_justice")),
    "bad_body": ("plugin_decider", b"pool-m",
                 json.dumps({"Command": "app-metrical", "Channel": "plugin_decider", "Body": "{x"}).encode()),
    "bad_metric": ("plugin_decider", b"pool-m", envelope("ats", 100.5, "plugin_decider")),
    "unknown_app": ("plugin_decider", b"pool-m", envelope("mysql", 50, "plugin_decider")),
    "no_policy": ("plugin_decider", b"pool-nobody", envelope("ats", 50, "plugin_decider")),
    "bad_key": ("plugin_decider", b"\xff\xfe", envelope("ats", 50, "plugin_decider")),
    "bad_policy": ("policies", b"pool-m", b'{"kind": "decider", "version": "v9", "apps": []}'),
    "bad_event": ("cluster-events", b"pool-m", b'{"type": "PoolCapacitySet", "capacity": -1}'),
    "not_driver": ("plugin_justice", b"pool-m", envelope("hadoop:latest", 50, "plugin_justice")),
}


def test_malformed_records_of_every_kind_go_to_the_dlq_and_the_worker_lives(
        kafka: str, unique: str, worker: Worker) -> None:
    p = f"{unique}."
    setup = [(p + "policies", b"pool-m", json.dumps(seed_policy()).encode()),
             (p + "policies", b"pool-m", json.dumps(justice_policy()).encode())]
    asyncio.run(produce_all(kafka, setup))
    assert len(decisions(kafka, unique, 1)) == 1, worker.log()[-3000:]

    rng = random.Random(4)
    kinds = sorted(MALFORMED)
    bad = [kinds[i % len(kinds)] for i in range(1000)]
    rng.shuffle(bad)
    mix: list[tuple[str, bytes | None, bytes | None]] = []
    valid = 0
    for code in bad:
        topic, key, value = MALFORMED[code]
        mix.append((p + topic, key, value))
        if rng.random() < 0.5:
            mix.append((p + "plugin_decider", b"pool-m", envelope(rng.choice(["ats", "hadoop"]),
                                                                  rng.randrange(101), "plugin_decider")))
            valid += 1
    asyncio.run(produce_all(kafka, mix))

    dead = []
    for topic in ("plugin_decider", "policies", "cluster-events", "plugin_justice"):
        dead += [json.loads(r.value) for r in asyncio.run(read_committed(
            kafka, f"{p}{topic}.dlq", expected=sum(1 for c in bad if MALFORMED[c][0] == topic), timeout=120))]
    got = decisions(kafka, unique, valid + 1)
    log = worker.log()
    assert Counter(d["reason_code"] for d in dead) == Counter(bad), log[-3000:]
    assert all(d["reason"] for d in dead)
    assert len(got) == valid + 1 and [d["seq"] for d in got] == list(range(1, valid + 2))
    assert worker.alive and worker.starts == 1
    assert "Crashed" not in log and "Restarting dead" not in log

    # What Prometheus reads at /metrics says the same: every dead letter by its topic and reason.
    from prometheus_client.parser import text_string_to_metric_families

    web = f"http://127.0.0.1:{worker.env['TRIBUNAL_WEB_PORT']}"
    with urllib.request.urlopen(f"{web}/metrics", timeout=10) as page:
        families = {f.name: f for f in text_string_to_metric_families(page.read().decode())}
    shown = Counter({(s.labels["topic"], s.labels["reason"]): int(s.value)
                     for s in families["tribunal_dead_letters"].samples if s.name.endswith("_total")})
    assert shown == Counter((p + d["cause"]["topic"].removeprefix(p), d["reason_code"]) for d in dead)
    folded = {s.labels["topic"]: s.value for s in families["tribunal_records"].samples
              if s.name.endswith("_total") and s.labels["outcome"] == "folded"}
    assert folded[p + "plugin_decider"] >= valid
    [count] = [s.value for s in families["tribunal_fold_seconds"].samples if s.name == "tribunal_fold_seconds_count"]
    assert count > valid
    with urllib.request.urlopen(f"{web}/pools/pool-m/", timeout=10) as page:
        described = json.load(page)
    [free] = [s.value for s in families["tribunal_pool_free_instances"].samples if s.labels["key"] == "pool-m"]
    assert free == described["decider"]["free"]
    lag = {(s.labels["topic"], s.labels["partition"]): s.value for s in families["tribunal_consumer_lag"].samples}
    decider = {k: v for k, v in lag.items() if k[0] == p + "plugin_decider"}
    assert len(decider) == 4 and set(decider.values()) == {0.0}, lag  # every input decided and committed


def test_a_ticked_pool_handles_an_app_that_stopped_reporting(kafka: str, zookeeper: str, unique: str,
                                                              worker: Worker, worker_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    """`tribunal dispatch ticker --pool` moves a silent pool's clock: its stale app is handled as its policy says."""
    policy = {**seed_policy(), "version": "stale", "apps": [
        {**seed_policy()["apps"][0], "stale_after_s": 2, "on_stale": "idle"}, seed_policy()["apps"][1]]}
    document = tmp_path / "stale.json"
    document.write_text(json.dumps(policy))
    tribunal("pools", "policy", "apply", str(document), "--pool", "pool-s", env=worker_env)
    env = {**worker_env, "ZOOKEEPER_HOSTS": zookeeper}
    clock = Service(env, tmp_path / "ticker.log", "dispatch", "ticker", "--root", f"/{unique}", "--pool", "pool-s",
                    "--pool-interval-ms", "300")
    clock.start()
    try:
        policy_decision, stale = decisions(kafka, unique, 2)
    finally:
        clock.stop()
    assert policy_decision["outcome"] == "policy"
    assert stale["trigger"] == {"kind": "stale", "app": "ats", "metrical": None, "capacity": None}, clock.log()
    assert stale["reason_code"] == "stale_metric" and stale["stale"]["on_stale"] == "idle"
    assert stale["cause"]["topic"] == f"{unique}.cluster-events" and stale["stale"]["silent_s"] >= 2
