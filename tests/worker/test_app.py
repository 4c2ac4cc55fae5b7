"""What a worker makes of its surroundings: changelogs the broker compacts soon (from a fresh start or an
earlier version's topics), logs a pipeline can read (`--log-format json`), and local stores kept for recovery
only when they can be trusted."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace

from streams.worker.app import CHANGELOG_CONFIG, COMMITTED_ONLY, STALE_AFTER, keep_or_discard_local_tables
from tests.conftest import _delete_topics
from tests.helpers import (
    Worker,
    create_topic,
    produce_all,
    read_committed,
    running,
    topic_settings,
    tribunal,
    until,
    wait_until_ready,
)


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


def test_local_stores_are_kept_only_when_marked_committed_only_and_recently_written(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    app = SimpleNamespace(conf=SimpleNamespace(tabledir=str(tables)))
    store = tables / "pool-state-0.db" / "000001.log"

    def written(at: float, marked: bool) -> None:
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text("states")
        os.utime(store, (at, at))
        (tables / COMMITTED_ONLY).unlink(missing_ok=True)
        if marked:
            (tables / COMMITTED_ONLY).touch()
            os.utime(tables / COMMITTED_ONLY, (at, at))

    now = 1_800_000_000.0
    assert keep_or_discard_local_tables(app, now) is False and (tables / COMMITTED_ONLY).exists()  # none yet
    written(now - 60, marked=True)
    assert keep_or_discard_local_tables(app, now) is False and store.exists()  # a restart: kept
    written(now - 60, marked=False)  # an earlier version's, written before its commits
    assert keep_or_discard_local_tables(app, now) is True and not store.exists()
    assert (tables / COMMITTED_ONLY).exists()  # what this version writes from now on is marked
    written(now - STALE_AFTER - 1, marked=True)  # older than a deleted key's tombstone may be kept
    assert keep_or_discard_local_tables(app, now) is True and not store.exists()


def test_stores_ahead_of_their_changelogs_are_discarded_and_the_worker_starts_afresh(kafka: str, unique: str,
                                                                                     worker_env: dict[str, str],
                                                                                     tmp_path: Path) -> None:
    """The topics deleted and made again under a worker's data directory: its stores claim offsets the new
    changelogs do not have (Faust's own check stopped the worker there at every start). It must say so, discard
    them, start again, and decide from fresh states: the new log's first decision is its pool's first."""
    import json

    from tests.worker.test_crash import pool_policy

    def policy(i: int) -> list[tuple[str, bytes, bytes]]:
        return [(f"{unique}.policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode())]

    tribunal("topics", "create", env=worker_env)
    worker = Worker(worker_env, tmp_path / "worker.log")
    with running(worker):
        wait_until_ready(worker, 1)
        for i in range(4):
            asyncio.run(produce_all(kafka, policy(i)))
        assert len(asyncio.run(read_committed(kafka, f"{unique}.scaling-decisions", 4, timeout=120))) == 4
    asyncio.run(_delete_topics(kafka, unique, until_gone=True))
    until(lambda: tribunal("topics", "create", env=worker_env, check=False).returncode == 0, "the topics made again",
          60, every=1)
    with running(worker):
        until(lambda: "local stores ahead of their changelogs" in worker.log(), lambda: worker.log()[-3000:], 120)
        wait_until_ready(worker, 3)  # the run that found them, and the one started in its place
        asyncio.run(produce_all(kafka, policy(0)))
        [decision] = asyncio.run(read_committed(kafka, f"{unique}.scaling-decisions", 1, timeout=120))
    assert json.loads(decision.value)["seq"] == 1, decision.value  # a fresh state, not the deleted topics'
    assert "ConsistencyError" not in worker.log()
