"""A shard node whose gate is paused while `/shard` is absent asks ZooKeeper again rather than wait for a watch
that will not call back.

kazoo's data watch calls back only when `/shard`'s version changes. A node paused for want of an answer (its
question failed, as one can on a session just healed), with `/shard` absent before and after, heard nothing more
and ran nothing until the next reshard: the node's own tasks stood still (the shards chaos test's healed node
waited 60 s in vain in one CI run). In process, on the real broker, worker and ZooKeeper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from streams.settings import Settings
from streams.shards import Execution, ShardNode
from tests.helpers import Worker, tribunal

pytestmark = [pytest.mark.integration]


async def _until(done: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not done():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def test_a_node_paused_without_an_answer_asks_again_and_runs_its_tasks(worker: Worker, worker_env: dict[str, str],
                                                                        zookeeper: str, unique: str,
                                                                        tmp_path: Path) -> None:
    tribunal("shards", "tasks", "--job-set", "js", "4", env=worker_env)
    settings = Settings(kafka_bootstrap=worker_env["KAFKA_BOOTSTRAP"], zookeeper_hosts=zookeeper,
                        topic_prefix=f"{unique}.")
    started: list[int] = []

    async def run(execution: Execution) -> None:
        started.append(execution.task)
        await asyncio.sleep(0.1)

    async def scenario() -> None:
        node = ShardNode(settings, "js", "n1", "127.0.0.1:1", run, period=0.5, session_timeout=4.0, grace=0.5,
                         root=f"/{unique}-shards")
        stop = asyncio.Event()
        serving = asyncio.ensure_future(node.serve(stop))
        try:
            await _until(lambda: len(started) >= 4 or serving.done(), "the node's first runs", 90)
            assert not serving.done(), serving
            node.gate.paused = True  # as after a question that failed: `/shard` is absent, as it was before
            await asyncio.sleep(0.5)
            before = len(started)
            await _until(lambda: not node.gate.paused and len(started) >= before + 4, "the node running again", 15)
        finally:
            stop.set()
            await serving

    asyncio.run(scenario())
