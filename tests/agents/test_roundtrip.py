"""A first real round trip: the worker as a separate process, aiokafka in, read_committed out."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.infra.cluster import free_ports
from streams.io import envelope
from tests.helpers import TRIBUNAL, end_offsets, read_committed, tribunal

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_env(kafka: str, unique: str, tmp_path: Path) -> dict[str, str]:
    [web_port] = free_ports(1)
    return {**os.environ, "KAFKA_BOOTSTRAP": kafka, "TRIBUNAL_TOPIC_PREFIX": f"{unique}.",
            "TRIBUNAL_APP_ID": unique, "TRIBUNAL_DATA_DIR": str(tmp_path / "worker"),
            "TRIBUNAL_WEB_PORT": str(web_port), "TRIBUNAL_PARTITIONS": "2"}


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    tribunal("topics", "create", env=worker_env)
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen([TRIBUNAL, "worker"], env=worker_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def test_envelopes_round_trip_through_the_worker(kafka: str, unique: str, worker: subprocess.Popen[bytes],
                                                 tmp_path: Path) -> None:
    valid = [(b"pool-a", envelope("ats", 55, "plugin_decider")),
             (b"pool-b", envelope("hadoop", 70, "plugin_decider")),
             (b"pool-a", envelope("ats", 75, "plugin_decider")),
             (None, envelope("Hadoop", 90, "plugin_decider"))]
    invalid = [(b"pool-a", b"not json"),
               (b"pool-b", envelope("ats", 101, "plugin_decider")),
               (b"pool-a", b'{"Command":"app-metrical","Channel":"plugin_decider","Body":"{nope"}')]
    interleaved = [valid[0], invalid[0], valid[1], invalid[1], valid[2], invalid[2], valid[3]]
    asyncio.run(_produce(kafka, f"{unique}.plugin_decider", interleaved))

    out = asyncio.run(read_committed(kafka, f"{unique}.app-metricals", expected=len(valid)))
    dlq = asyncio.run(read_committed(kafka, f"{unique}.plugin_decider.dlq", expected=len(invalid)))
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert worker.poll() is None, f"the worker died:\n{log[-3000:]}"
    assert len(out) == len(valid) and len(dlq) == len(invalid), log[-3000:]

    decided = sorted((json.loads(r.value)["pool"], json.loads(r.value)["seq"], json.loads(r.value)["app"],
                      json.loads(r.value)["metrical"]) for r in out)
    assert decided == [("default", 1, "Hadoop", 90.0), ("pool-a", 1, "ats", 55.0), ("pool-a", 2, "ats", 75.0),
                       ("pool-b", 1, "hadoop", 70.0)]
    assert all(json.loads(r.value)["cause"]["topic"] == f"{unique}.plugin_decider" for r in out)
    codes = sorted(json.loads(r.value)["reason_code"] for r in dlq)
    assert codes == ["bad_body", "bad_envelope", "bad_metric"]

    # Written inside transactions: every partition that got outputs also holds commit markers, so
    # its end offset runs past the records it carries (a plain producer's would equal them).
    ends = asyncio.run(end_offsets(kafka, f"{unique}.app-metricals"))
    per_partition = {p: sum(1 for r in out if r.partition == p) for p in ends}
    assert all(ends[p] > n for p, n in per_partition.items() if n), (ends, per_partition)
