"""One worker for the decider's live tests (each test has pools of its own): starting one is most of a test's time."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from schemas.policy import DeciderPolicy
from streams.infra.topology import free_ports
from streams.settings import Settings
from tests.conftest import _delete_topics
from tests.helpers import Worker, tribunal, wait_until_ready

SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -5}, {"Metrical": [40, 60], "Number": 0},
        {"Metrical": [60, 80], "Number": 2}, {"Metrical": [80, 100], "Number": 4}]


def policy(capacity: int = 8, version: str = "v1", **initial: int) -> DeciderPolicy:
    """Two apps: web (priority 1) and batch (priority 2), each at least 1; load 80-100 asks for 4 more, and under 20
    gives 10 back at once (eager release: instances shrink without another app asking)."""
    start = initial or {"web": 1, "batch": 1}
    return DeciderPolicy.model_validate({
        "kind": "decider", "version": version, "capacity": capacity, "initial": start,
        "apps": [{"App": "web", "Priority": 1, "MinNum": 1, "Spec": SPEC, "release": "eager"},
                 {"App": "batch", "Priority": 2, "MinNum": 1, "Spec": SPEC, "release": "eager"}]})


@dataclass
class Loop:
    env: dict[str, str]
    settings: Settings
    worker: Worker
    zookeeper: str
    root: str

    def cli_env(self) -> dict[str, str]:
        return {**self.env, "ZOOKEEPER_HOSTS": self.zookeeper}


@pytest.fixture(scope="module")
def loop(kafka: str, zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    name = f"t{uuid.uuid4().hex[:10]}"
    where: Path = tmp_path_factory.mktemp("decider")
    [web_port] = free_ports(1)
    env = {**os.environ, "KAFKA_BOOTSTRAP": kafka, "TRIBUNAL_TOPIC_PREFIX": f"{name}.", "TRIBUNAL_APP_ID": name,
           "TRIBUNAL_DATA_DIR": str(where / "worker"), "TRIBUNAL_WEB_PORT": str(web_port), "TRIBUNAL_PARTITIONS": "2"}
    tribunal("topics", "create", env=env)
    worker = Worker(env, where / "worker.log")
    worker.start()
    try:
        wait_until_ready(worker, 1)
        yield Loop(env, Settings(kafka_bootstrap=kafka, topic_prefix=f"{name}.", app_id=name), worker, zookeeper,
                   f"/{name}")
    finally:
        worker.stop()
        asyncio.run(_delete_topics(kafka, name))


def metric_values(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """A family's samples from a `/metrics` page, read by prometheus_client's own parser: labels -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: Any = response.read().decode()
    return str(text)
