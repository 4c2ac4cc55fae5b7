"""Helpers shared by the integration tests: the CLI as a user runs it, its daemons started and stopped, waiting on
a condition, and reading topics."""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from streams import kafka

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))


def tribunal(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
             check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `.venv/bin/tribunal ARGS` and return its completed process."""
    proc = subprocess.run([TRIBUNAL, *args], capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"tribunal {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def agreed(stdout: str, inputs: int) -> int:
    """`replay --verify` agreed over `inputs` input records: how many output records it compared (a decision writes
    one, and a `PoolInstances` for each app it changed)."""
    found = re.search(rf"verified: (\d+) output records of {inputs} input records agree", stdout)
    assert found is not None, stdout
    return int(found.group(1))


async def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 90.0) -> list[Any]:
    """Read `topic` from the start as a downstream consumer would, until `expected` records or timeout."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                isolation_level="read_committed", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(records) < expected and asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp in sorted(batch, key=lambda t: t.partition):
                records.extend(batch[tp])
    finally:
        await consumer.stop()
    return records


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic) or set()
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in sorted(partitions)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


class Service:
    """A long-running `tribunal ARGS` process, as an operator runs it; killable and restartable."""

    args: tuple[str, ...] = ()

    def __init__(self, env: dict[str, str], log_path: Path, *args: str, wrap: Sequence[str] = ()) -> None:
        self.env = env
        self.log_path = log_path
        self.args = args or self.args
        self.wrap = list(wrap)  # a command that runs the service's (`Namespace.wrap`: in a network namespace)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen([*self.wrap, TRIBUNAL, *self.args], env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        self.starts += 1

    def kill(self) -> None:
        """SIGKILL: no flush, no commit, no goodbye."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = 60) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Worker(Service):
    """`tribunal worker`."""

    args = ("worker",)


S = TypeVar("S", bound=Service)


@contextmanager
def running(service: S) -> Iterator[S]:
    """`service` started, and stopped when the block ends, however it ends."""
    service.start()
    try:
        yield service
    finally:
        service.stop()


T = TypeVar("T")


def until(done: Callable[[], T], what: str | Callable[[], str], timeout: float = 60, every: float = 0.1) -> T:
    """Wait until `done()` returns something true, and return it; after `timeout` s fail, saying `what` was waited
    for (a callable is asked then: a log's tail, say)."""
    deadline = time.monotonic() + timeout
    while not (result := done()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        time.sleep(every)
    return result


async def eventually(done: Callable[[], object], what: str, timeout: float = 60) -> None:
    """`until` for a test that waits inside its event loop (on a client it runs there)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


Partitioner = Callable[[bytes | None], int | None]


async def produce_all(bootstrap: str, records: list[tuple[str, bytes | None, bytes | None]],
                      rate: float | None = None, partitioner: Partitioner | None = None,
                      first_timestamp: int | None = None) -> list[tuple[int, int]]:
    """Produce (topic, key, value) records in order, idempotently; at most `rate` per second if given.

    `partitioner(key)` picks each record's partition (None: Kafka's default, murmur2); record i is
    stamped `first_timestamp + i` ms if given (the producer's clock otherwise), so that two runs
    of one log carry the same causes. Returns each record's (partition, offset).
    """
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        started = asyncio.get_running_loop().time()
        futures = []
        for i, (topic, key, value) in enumerate(records):
            partition = partitioner(key) if partitioner is not None else None
            timestamp = None if first_timestamp is None else first_timestamp + i
            futures.append(await producer.send(topic, value, key=key, partition=partition, timestamp_ms=timestamp))
            if rate:
                ahead = started + i / rate - asyncio.get_running_loop().time()
                if ahead > 0:
                    await asyncio.sleep(ahead)
        return [(m.partition, m.offset) for m in await asyncio.gather(*futures)]
    finally:
        await producer.stop()


def wait_until_ready(worker: Worker, start: int, timeout: float = 180) -> None:
    """Until the latest run (at least the `start`-th; restarts in place add runs) folds records."""
    def ready() -> bool:
        runs = worker.log().split("[^Worker]: Starting...")
        return len(runs) > start and "[^Worker]: Ready" in runs[-1]

    until(ready, lambda: f"run {start} of the worker to get ready:\n{worker.log()[-3000:]}", timeout, every=0.2)


def kill_repeatedly(worker: Worker, busy: threading.Thread, rng: random.Random, at_least: int,
                    longest: float) -> int:
    """SIGKILL the worker at random moments while it folds, until `busy` ends and `at_least` kills."""
    kills = 0
    while kills < at_least or busy.is_alive():
        wait_until_ready(worker, kills + 1)
        time.sleep(rng.uniform(0.5, longest))
        worker.kill()
        kills += 1
        worker.start()
    return kills


def produce_while_killing(bootstrap: str, records: list[tuple[str, bytes | None, bytes | None]], rate: float,
                          worker: Worker, rng: random.Random, at_least: int, longest: float,
                          partitioner: Partitioner | None = None) -> tuple[list[tuple[int, int]], int]:
    """Produce `records` at `rate` while SIGKILLing the worker; (each record's partition and offset, kills)."""
    produced: list[tuple[int, int]] = []
    producer = threading.Thread(target=lambda: produced.extend(asyncio.run(
        produce_all(bootstrap, records, rate, partitioner))))
    producer.start()
    kills = kill_repeatedly(worker, producer, rng, at_least, longest)
    producer.join()
    return produced, kills


async def topic_settings(bootstrap: str, topic: str) -> dict[str, str]:
    """A topic's own settings (set on it, not inherited from the broker or Kafka's defaults)."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [(_, _, _, _, entries)] = response.resources
        return {name: value for name, value, _, source, *_ in entries if source == 1}
    finally:
        await admin.close()


async def create_topic(bootstrap: str, topic: str, settings: dict[str, str], partitions: int = 2) -> None:
    """A topic with these settings, as another tool (or an earlier version) would have made it."""
    from aiokafka.admin import NewTopic

    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=settings)])
    finally:
        await admin.close()
