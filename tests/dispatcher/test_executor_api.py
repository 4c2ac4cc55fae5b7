"""A tenant's executor through the dispatcher's API alone, live: a token and no Kafka settings that could reach the
broker; its starts come as server-sent events and its finishes go back as requests naming it. The API is killed
while jobs are assigned and started, and started again: the executor resumes from the last start it handled, so
every start written meanwhile runs, and none twice."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from streams.dispatcher.auth import AuthFile
from streams.dispatcher.client import JobAssign
from streams.dispatcher.http_client import HttpDispatcherClient
from streams.infra.topology import free_ports
from tests.dispatcher.test_api import answers, call
from tests.helpers import Service, Worker, running, tribunal, until, wait_until_ready

NS = "via-api"


def runs(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_an_executor_runs_its_jobs_through_the_api_alone_and_resumes_after_the_api_died(
        worker_env: dict[str, str], worker: Worker, tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    admin = AuthFile(auth).create("ops", "admin", (NS,), None)
    tenant_file = tmp_path / "tenant.token"
    tenant_file.write_text(AuthFile(auth).create("tenant-w1", "tenant", (NS,), "w1") + "\n")
    tenant_file.chmod(0o600)
    [port] = free_ports(1)
    base = f"http://127.0.0.1:{port}"
    run_log = tmp_path / "runs.jsonl"
    # the tenant's environment names no broker it could reach, and no credentials: only the API
    tenant_env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_")}
    tenant_env["TRIBUNAL_KAFKA_BOOTSTRAP"] = "127.0.0.1:9"
    api = Service(worker_env, tmp_path / "api.log", "dispatch", "api", "--port", str(port), "--auth-file", str(auth))
    executor = Service(tenant_env, tmp_path / "executor.log", "dispatch", "executor", "--namespace", NS, "--worker",
                       "w1",
                       "--seconds", "0.2", "--run-log", str(run_log), "--api", base, "--token-file", str(tenant_file),
                       "--state-dir", str(tmp_path / "executor"))
    ticker = Service(worker_env, tmp_path / "ticker.log", "dispatch", "ticker", "--namespace", NS, "--root",
                     f"/{NS}-{port}")
    with running(api), running(ticker):
        wait_until_ready(worker, 1)
        until(lambda: answers(base), lambda: f"the API to answer: {api.log()}")
        with running(executor):
            cursor = tmp_path / "executor" / NS / "w1" / "events.cursor"
            until(cursor.exists, lambda: f"the executor to follow its events: {executor.log()}", timeout=90)

            async def assign(n: int) -> list[str]:  # as the operator's program would: the client's HTTP mode
                async with HttpDispatcherClient(base, admin, NS) as client:
                    capped = await client.set_max_threads(2)
                    built = JobAssign("w1").start(int(time.time() * 1000))
                    for i in range(n):
                        built.job(f"j{i}")
                    assigned = await client.assign_job(built)
                assert assigned.written.offset == capped.offset + 1
                return assigned.uuids

            first = asyncio.run(assign(3))
            assert call(base, "GET", f"/namespaces/{NS}/jobs/{first[0]}", token=admin)[0] in (200, 404)
            until(lambda: {r["uuid"] for r in runs(run_log) if r["event"] == "finish"} >= set(first),
                  lambda: f"the first jobs to run: {executor.log()[-3000:]}", timeout=90)

            api.kill()  # the stream breaks; starts written now must reach the executor after the API is back
            written = tribunal("dispatch", "jobs", "assign", "--namespace", NS, "--worker", "w1", "--count", "3",
                               env=worker_env).stdout.splitlines()
            second = written[1:]
            assert len(second) == 3
            time.sleep(2)  # the jobs start while no API serves their events
            api.start()
            until(lambda: answers(base), lambda: f"the API to answer again: {api.log()}")
            until(lambda: {r["uuid"] for r in runs(run_log) if r["event"] == "finish"} >= set(second),
                  lambda: f"the jobs started while the API was down to run: {executor.log()[-3000:]}", timeout=90)
            assert "reconnecting" in executor.log()

        starts = [(r["uuid"], r["attempt"]) for r in runs(run_log) if r["event"] == "start"]
        assert sorted(starts) == sorted(set(starts)) and {u for u, _ in starts} == set(first) | set(second)
        # the outcomes on the log, and who reported them
        tail = tribunal("topics", "tail", "dispatch-commands", "--json", "--from-beginning", "--max", "100",
                        "--idle-timeout",
                        "5", env=worker_env)
        finishes = {v["uuid"]: v.get("principal") for v in (json.loads(line)["value"] for line in
                                                             tail.stdout.splitlines()) if v["type"] == "JobFinished"}
        assert {u: finishes.get(u) for u in first + second} == {u: "tenant-w1" for u in first + second}
        assert "aiokafka" not in executor.log()
