"""Fixtures for end-to-end tests: a worker process with its own topics, app id and data directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Worker, tribunal


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Worker]:
    tribunal("topics", "create", env=worker_env)
    w = Worker(worker_env, tmp_path / "worker.log")
    w.start()
    try:
        yield w
    finally:
        w.stop()
