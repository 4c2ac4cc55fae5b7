"""Fixtures for end-to-end tests: a worker process with its own topics, app id and data directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.infra.cluster import free_ports
from tests.helpers import Worker, tribunal


@pytest.fixture
def worker_env(kafka: str, unique: str, tmp_path: Path) -> dict[str, str]:
    [web_port] = free_ports(1)
    return {**os.environ, "KAFKA_BOOTSTRAP": kafka, "TRIBUNAL_TOPIC_PREFIX": f"{unique}.",
            "TRIBUNAL_APP_ID": unique, "TRIBUNAL_DATA_DIR": str(tmp_path / "worker"),
            "TRIBUNAL_WEB_PORT": str(web_port), "TRIBUNAL_PARTITIONS": "4"}


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Worker]:
    tribunal("topics", "create", env=worker_env)
    w = Worker(worker_env, tmp_path / "worker.log")
    w.start()
    try:
        yield w
    finally:
        w.stop()
