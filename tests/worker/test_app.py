"""What a worker makes of its surroundings: changelogs the broker compacts soon (from a fresh start or an
earlier version's topics), and logs a pipeline can read (`--log-format json`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from streams.worker.app import CHANGELOG_CONFIG
from tests.helpers import Worker, create_topic, running, topic_settings, tribunal, wait_until_ready


def test_changelogs_are_compacted_soon_also_those_an_earlier_version_made(kafka: str, unique: str,
                                                                          worker_env: dict[str, str],
                                                                          tmp_path: Path) -> None:
    earlier = f"{unique}-pool-state-changelog"  # as Faust made it before: compacted, Kafka's 1 GB segments
    asyncio.run(create_topic(kafka, earlier, {"cleanup.policy": "compact"}, partitions=4))
    tribunal("topics", "create", env=worker_env)
    with running(Worker(worker_env, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
        for table in ("pool-state", "pool-policies", "group-buckets"):
            assert asyncio.run(topic_settings(kafka, f"{unique}-{table}-changelog")) == {
                "cleanup.policy": "compact", **CHANGELOG_CONFIG}, table


def test_with_json_logs_every_line_the_worker_writes_is_one_json_object(worker_env: dict[str, str],
                                                                       tmp_path: Path) -> None:
    import json

    tribunal("topics", "create", env=worker_env)
    with running(Worker({**worker_env, "TRIBUNAL_LOG_FORMAT": "json"}, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
    lines = worker.log().splitlines()
    entries = [json.loads(line) for line in lines]  # no banner, no table drawn across lines
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert any(e["message"] == "[^Worker]: Ready" for e in entries)
