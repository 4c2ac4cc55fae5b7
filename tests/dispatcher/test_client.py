"""The client, the ticker and the demo executor live: a real worker, Kafka and ZooKeeper."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from schemas.dispatch import JobOutcome, JobStarted
from streams.dispatcher import DispatcherClient, JobAssign
from streams.settings import Settings
from tests.helpers import Service, Worker, end_offsets, eventually, produce_all, tribunal, until, wait_until_ready


def ticker(env: dict[str, str], tmp_path: Path, unique: str, name: str = "ticker") -> Service:
    return Service(env, tmp_path / f"{name}.log", "dispatch", "ticker", "--root", f"/{unique}", "--session-timeout",
                   "4")


@pytest.fixture
def env(worker_env: dict[str, str], zookeeper: str) -> dict[str, str]:
    return {**worker_env, "ZOOKEEPER_HOSTS": zookeeper}


def test_the_client_assigns_hears_its_starts_and_failures_and_finishing_frees_a_slot(
        env: dict[str, str], worker: Worker, tmp_path: Path, unique: str) -> None:
    clock = ticker(env, tmp_path, unique)
    clock.start()
    settings = Settings(kafka_bootstrap=env["KAFKA_BOOTSTRAP"], topic_prefix=f"{unique}.", app_id=unique)
    starts: list[JobStarted] = []
    failed: list[JobOutcome] = []

    async def scenario() -> list[str]:
        async with DispatcherClient(settings, "ns", {"w1"}) as client:
            client.on_job_start(starts.append)
            client.on_job_fail(failed.append)
            ready = asyncio.Event()
            listening = asyncio.create_task(client.run(ready))
            await asyncio.wait_for(ready.wait(), 60)
            await client.set_max_threads(2)
            now = int(time.time() * 1000)
            assigned = await client.assign_job(JobAssign("w1").start(now).end(now + 10).job("a").job("b").job("c"))
            await eventually(lambda: len(starts) >= 2, "two starts")
            await asyncio.sleep(1.0)  # ticks go on: the cap of 2 holds the third back
            assert [s.external_id for s in starts] == ["a", "b"]
            await client.finish_job(starts[0].uuid)
            await eventually(lambda: len(starts) >= 3, "the third start once a slot is free")
            doomed = await client.assign_job(JobAssign("w1").start(now).job("doomed", max_retries=0))
            await client.finish_job(starts[1].uuid)
            await eventually(lambda: len(starts) >= 4, "the doomed job's start")
            await client.fail_job(doomed.uuids[0], "it broke")
            await eventually(lambda: len(failed) >= 1, "the final failure")
            await client.assign_job(JobAssign("w2").start(now).job("not-mine"))  # another tenant's: starts now
            await client.assign_job(JobAssign("w1").start(now).job("last"))  # waits for a slot (c, not-mine run)
            await asyncio.sleep(1.0)
            await client.finish_job(starts[2].uuid)
            await eventually(lambda: len(starts) >= 5, "the last start")
            listening.cancel()
            return assigned.uuids

    try:
        wait_until_ready(worker, 1)
        uuids = asyncio.run(scenario())
        assert [s.uuid for s in starts[:3]] == uuids  # the uuids the client computed are the dispatcher's
        assert [s.external_id for s in starts] == ["a", "b", "c", "doomed", "last"]  # never w2's "not-mine"
        assert all(s.worker == "w1" and s.namespace == "ns" for s in starts)
        assert (failed[0].external_id, failed[0].error, failed[0].final) == ("doomed", "it broke", True)
    finally:
        clock.stop()
    assert "elected: ticking" in clock.log(), clock.log()[-2000:]


def test_the_demo_executor_runs_what_the_cli_assigns(env: dict[str, str], worker: Worker, tmp_path: Path,
                                                     unique: str) -> None:
    clock = ticker(env, tmp_path, unique)
    run_log = tmp_path / "runs.jsonl"
    executor = Service(env, tmp_path / "executor.log", "dispatch", "executor", "--namespace", "demo", "--worker", "w1",
                       "--seconds", "0.2", "--run-log", str(run_log))
    clock.start()
    executor.start()
    try:
        wait_until_ready(worker, 1)
        time.sleep(3)  # the executor joins its group before the jobs are assigned
        tribunal("dispatch", "jobs", "max", "--namespace", "demo", "--threads", "1", env=env)
        out = tribunal("dispatch", "jobs", "assign", "--namespace", "demo", "--worker", "w1", "--count", "3",
                       "--external-id", "demo", env=env).stdout
        uuids = out.split()[-3:]
        def finished() -> list[dict[str, Any]]:
            lines = [json.loads(x) for x in run_log.read_text().splitlines()] if run_log.exists() else []
            return lines if sum(x["event"] == "finish" for x in lines) == 3 else []

        lines = until(finished, lambda: f"all three to run: {executor.log()[-2000:]}\n{clock.log()[-1000:]}", 90,
                      every=0.2)
        assert [x["uuid"] for x in lines if x["event"] == "start"] == uuids
        events = [x["event"] for x in lines]
        assert events == ["start", "finish"] * 3  # a cap of 1: one at a time
        state = json.loads(tribunal("dispatch", "state", "--namespace", "demo", "--json", env=env).stdout)
        assert (state["running"], state["pending"]) == (0, 0)
        ended = tribunal("dispatch", "jobs", "show", uuids[0], "--namespace", "demo",
                         env=env).stdout  # it left the state:
        assert ended.startswith(f"job       {uuids[0]} in namespace demo")  # its history, from the log
        assert "final     JobFinished (attempt 1)" in ended and "sent by" not in ended  # the CLI writes as no one
        never = tribunal("dispatch", "jobs", "show", "no-such-job", "--namespace", "demo", env=env, check=False)
        assert never.returncode == 1 and "neither pending nor running" in never.stderr
    finally:
        executor.stop()
        clock.stop()


def test_one_ticker_ticks_at_a_time_and_another_takes_over_when_it_dies(
        env: dict[str, str], tmp_path: Path, unique: str, kafka: str) -> None:
    tribunal("topics", "create", env=env)
    first, second = ticker(env, tmp_path, unique, "first"), ticker(env, tmp_path, unique, "second")
    for t in (first, second):
        t.args = (*t.args, "--namespace", "always", "--interval-ms", "100")
        t.start()
    try:
        until(lambda: "elected: ticking" in first.log() + second.log(),
              lambda: f"a ticker to be elected: {first.log() + second.log()}")
        leader, standby = (first, second) if "elected: ticking" in first.log() else (second, first)
        time.sleep(2)
        assert "elected: ticking" not in standby.log()
        leader.kill()
        until(lambda: "elected: ticking" in standby.log(), lambda: f"the standby to be elected: {standby.log()}")
        time.sleep(1)
    finally:
        first.stop()
        second.stop()
    ticks = [r["value"] for r in map(json.loads, tribunal(
        "topics", "tail", "ticks", "--json", "--from-beginning", "--idle-timeout", "3", env=env).stdout.splitlines())]
    assert ticks and all(t["namespace"] == "always" for t in ticks)
    nows = [t["now"] for t in ticks]
    # one ticker at a time: ticks about 100 ms apart, never two within a few ms (both tickers would interleave)
    gaps = sorted(b - a for a, b in itertools.pairwise(nows))
    assert gaps[len(gaps) // 10] >= 50, gaps[:20]
    assert max(gaps) >= 1_000  # the gap while the standby waited for the leader's session to expire


def test_the_client_passes_over_a_record_it_cannot_read_and_never_reads_it_again(
        worker_env: dict[str, str], kafka: str, unique: str) -> None:
    """Not JSON, not an object, a start whose deadline is past 64 bits: each is logged and committed past; the
    listener hears the good start after them, and a client restarted in the same group hears nothing again."""
    tribunal("topics", "create", env=worker_env)
    settings = Settings(kafka_bootstrap=kafka, topic_prefix=f"{unique}.", app_id=unique)
    good = {"type": "JobStarted", "namespace": "ns", "uuid": "u1", "external_id": "e1", "worker": "w1", "info": "",
            "attempt": 1, "started_at": 1, "deadline": 2, "expected_start": 0, "acceptable_start": 0,
            "cause": {"topic": "dispatch-commands", "partition": 0, "offset": 0, "timestamp": 1}, "seq": 1}
    bad = [b"\xff not json", b"[1, 2]", json.dumps({**good, "deadline": 1 << 63}).encode(), b""]
    heard: list[JobStarted] = []

    async def listen(values: list[bytes]) -> None:
        async with DispatcherClient(settings, "ns") as client:
            client.on_job_start(heard.append)
            ready = asyncio.Event()
            listening = asyncio.create_task(client.run(ready))
            await asyncio.wait_for(ready.wait(), 60)
            await produce_all(kafka, [(f"{unique}.job-starts", b"ns", v) for v in values])
            await eventually(lambda: len(heard) >= 1, "the good start")
            await asyncio.sleep(1.0)  # its commit
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening

    asyncio.run(listen([*bad, json.dumps(good).encode()]))
    assert [s.uuid for s in heard] == ["u1"]
    ends = asyncio.run(end_offsets(kafka, f"{unique}.job-starts"))
    written = {p: end for p, end in ends.items() if end}
    group = DispatcherClient(settings, "ns").group_id
    assert asyncio.run(committed(kafka, group, f"{unique}.job-starts", sorted(written))) == written  # past all five


async def committed(kafka: str, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        await consumer.stop()


def _job_processes(uuid: str) -> list[int]:
    """The live processes of a job run by `--command` (their environment names the job)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("TRIBUNAL_JOB") == uuid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
    return found


@pytest.mark.chaos
def test_the_executor_runs_each_job_as_a_process_judged_by_its_exit_and_deadline_and_they_die_with_it(
        env: dict[str, str], worker: Worker, tmp_path: Path, unique: str) -> None:
    """Issue 47: exit 0 finishes a job with its attempt, any other exit fails it, a job past its deadline is killed
    and failed; and an executor SIGKILLed takes its jobs' processes (a child of their own too) with it."""
    clock = ticker(env, tmp_path, unique)
    run_log = tmp_path / "runs.jsonl"
    command = ("sh -c 'case {external_id} in ok) exit 0;; bad) exit 3;; "
               "*) sleep 60 & sleep 60 & wait;; esac' {info}")
    executor = Service(env, tmp_path / "executor.log", "dispatch", "executor", "--namespace", "px", "--worker", "w1",
                       "--run-log", str(run_log), "--command", command, "--state-dir", str(tmp_path / "jobs"),
                       "--term-grace", "0.5")
    settings = Settings(kafka_bootstrap=env["KAFKA_BOOTSTRAP"], topic_prefix=f"{unique}.", app_id=unique)
    clock.start()
    executor.start()

    def logged() -> list[dict[str, Any]]:
        return [json.loads(x) for x in run_log.read_text().splitlines()] if run_log.exists() else []

    async def assign(jobs: JobAssign) -> list[str]:
        async with DispatcherClient(settings, "px") as client:
            return (await client.assign_job(jobs)).uuids

    try:
        wait_until_ready(worker, 1)
        until(lambda: "running" in executor.log(), lambda: executor.log()[-2000:], 60)
        time.sleep(3)  # the executor joins its group before the jobs are assigned
        now = int(time.time() * 1000)
        three = JobAssign("w1").start(now).job("ok").job("bad").job("slow", timeout_ms=2000)
        ok, bad, slow = asyncio.run(assign(three))
        until(lambda: {x["uuid"] for x in logged() if x["event"] in ("finish", "fail")} >= {ok, bad, slow},
              lambda: f"three ends: {logged()}\n{executor.log()[-2000:]}", 60, every=0.2)
        ends = {x["uuid"]: x for x in logged() if x["event"] in ("finish", "fail")}
        assert ends[ok]["event"] == "finish"
        assert (ends[bad]["event"], ends[bad]["error"]) == ("fail", "exit status 3")
        assert ends[slow]["event"] == "fail" and ends[slow]["error"].startswith("timed out"), ends[slow]
        until(lambda: not _job_processes(slow), "the slow job's processes killed at its deadline", 10)

        [held] = asyncio.run(assign(JobAssign("w1").start(now).job("held")))
        until(lambda: len(_job_processes(held)) == 3, lambda: f"the held job running: {_job_processes(held)}", 60)
        executor.kill()
        killed = time.monotonic()
        until(lambda: not _job_processes(held), lambda: f"orphans: {_job_processes(held)}", 5, every=0.01)
        assert time.monotonic() - killed < 1.0
    finally:
        executor.stop()
        clock.stop()
    assert "Traceback" not in executor.log(), executor.log()[-3000:]
