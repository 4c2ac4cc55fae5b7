"""An executor cut off mid-job by a real network partition (issue 47): the executor in a network namespace of its
own (`tests.netns`), the worker and the ticker on the host, the stack on the bridge's address.

Its job's process finishes while the executor cannot reach the brokers; the dispatcher times the attempt out and
starts the retry; healed, the executor's late report of the first attempt is refused by attempt (dead-lettered
`late_report`), and the retry runs once, its finish the job's one final outcome.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.dispatcher import DispatcherClient, JobAssign
from streams.settings import Settings
from tests.conftest import Stack, env_of
from tests.dispatcher.test_client import ticker
from tests.helpers import Service, Worker, read_committed, tribunal, until, wait_until_ready
from tests.netns import Network

TIMEOUT_MS = 8000  # each attempt's: the retry runs within it once the link is back


@pytest.fixture
def env(net_stack: Stack, unique: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**env_of(net_stack.bootstrap, unique, tmp_path), "ZOOKEEPER_HOSTS": net_stack.zookeeper}
    tribunal("topics", "create", env=env)
    worker = Worker(env, tmp_path / "worker.log")
    worker.start()
    try:
        wait_until_ready(worker, 1)
        yield env
    finally:
        worker.stop()


def test_an_executor_cut_off_mid_job_has_its_late_report_refused_and_the_retry_runs_once(
        env: dict[str, str], network: Network, tmp_path: Path, unique: str) -> None:
    space = network.namespace()
    marks, run_log = tmp_path / "marks", tmp_path / "runs.jsonl"
    # each attempt leaves a mark; the first takes 2 s, the retry none
    command = f"sh -c 'echo {{attempt}} >> {marks}; [ {{attempt}} = 1 ] && sleep 2; exit 0'"
    executor = Service(env, tmp_path / "executor.log", "dispatch", "executor", "--namespace", "px", "--worker", "w1",
                       "--run-log", str(run_log), "--command", command, "--state-dir", str(tmp_path / "jobs"),
                       "--term-grace", "0.5", wrap=space.wrap([]))
    clock = ticker(env, tmp_path, unique)
    settings = Settings(kafka_bootstrap=env["KAFKA_BOOTSTRAP"], topic_prefix=f"{unique}.", app_id=unique)

    def read(topic: str) -> list[dict[str, Any]]:
        return [json.loads(r.value) for r in asyncio.run(read_committed(env["KAFKA_BOOTSTRAP"], f"{unique}.{topic}",
                                                                        10**6, timeout=1))]

    def logged() -> list[dict[str, Any]]:
        return [json.loads(x) for x in run_log.read_text().splitlines()] if run_log.exists() else []

    async def assign() -> str:
        async with DispatcherClient(settings, "px") as client:
            now = int(time.time() * 1000)
            [uuid] = (await client.assign_job(JobAssign("w1").start(now).job("cut", timeout_ms=TIMEOUT_MS,
                                                                              max_retries=1))).uuids
            return uuid

    clock.start()
    executor.start()
    try:
        until(lambda: "running" in executor.log(), lambda: executor.log()[-2000:], 60)
        time.sleep(3)  # the executor joins its group before the job is assigned
        uuid = asyncio.run(assign())
        until(lambda: marks.exists(), lambda: f"the first attempt started: {executor.log()[-2000:]}", 60, every=0.05)
        space.cut()
        cut = time.monotonic()
        # the first attempt's process ends (exit 0) while the executor is cut off; its deadline passes, and the
        # dispatcher times it out and starts the retry (healed then, so that the retry has its whole timeout)
        until(lambda: [o for o in read("job-outcomes") if o["type"] == "JobTimedOut" and o.get("attempt") == 1],
              "the first attempt timed out", 60, every=0.5)
        space.heal()
        until(lambda: [x["attempt"] for x in logged() if x["event"] == "finish"] == [1, 2],
              lambda: f"both attempts' finishes: {logged()}\n{executor.log()[-3000:]}", 120, every=0.2)


        # the worker folds the late report and the retry's finish on its own time: until both are committed
        def final() -> list[dict[str, Any]] | None:
            got = read("job-outcomes")
            return got if any(o.get("final") for o in got) else None

        outcomes = until(final, "the job's final outcome", 60)
        dead = until(lambda: read("dispatch-commands.dlq") or None, "the late report dead-lettered", 60)
    finally:
        executor.stop()
        clock.stop()
        space.heal()
    assert time.monotonic() - cut > TIMEOUT_MS / 1000
    assert marks.read_text().split() == ["1", "2"]  # the retry ran once, and only the retry
    mine = [o for o in outcomes if o.get("uuid") == uuid]
    said = [(o["type"], o.get("attempt"), o.get("final")) for o in mine]
    print(said)
    assert said == [("JobTimedOut", 1, False), ("JobRetryScheduled", 1, False), ("JobFinished", 2, True)], mine
    assert [d["reason_code"] for d in dead] == ["late_report"], dead
    assert "Traceback" not in executor.log(), executor.log()[-3000:]
