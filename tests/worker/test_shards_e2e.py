"""Shard plans live: membership and acknowledgements through a real worker; state, replay, explain and report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.audit.browser import assert_shows_plots
from tests.helpers import Worker, produce_all, read_committed, running, tribunal, wait_until_ready

JS = "js-live"


def _event(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "job_set": JS, **fields}).encode()


def test_plans_epochs_acks_and_the_audit_tools(worker_env: dict[str, str], kafka: str, unique: str,
                                               tmp_path: Path) -> None:
    tribunal("topics", "create", env=worker_env)
    events, acks = f"{unique}.shard-events", f"{unique}.shard-acks"
    with running(Worker(worker_env, tmp_path / "worker.log")) as worker:
        wait_until_ready(worker, 1)
        tribunal("shards", "tasks", "--job-set", JS, "2300", env=worker_env)
        key = JS.encode()
        asyncio.run(produce_all(kafka, [
            *[(events, key, _event("NodeJoined", node=f"n{i}", address=f"10.0.0.{i}:9000", incarnation=i))
              for i in (3, 1, 2)],
            (events, key, _event("TaskCountSet", tasks=-5)),  # bad input: each to the dead letters
            (events, key, _event("NodeJoined", node="n1", address="10.9.9.9:9000", incarnation=1)),
            (acks, b"nobody", json.dumps({"type": "ShardAck", "job_set": "nobody", "node": "n1", "epoch": 1}).encode()),
        ]))
        plans = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.shard-plans", 4))]
        assert [p["epoch"] for p in plans] == [1, 2, 3, 4]
        assert plans[-1]["ranges"] == {"n1": [[1, 766]], "n2": [[767, 1532]], "n3": [[1533, 2300]]}
        dead = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{events}.dlq", 2))]
        dead += [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{acks}.dlq", 1))]
        assert [d["reason_code"] for d in dead] == ["bad_event", "duplicate_node", "unknown_job_set"]

        asyncio.run(produce_all(kafka, [(acks, key, _event("ShardAck", node=n, epoch=4)) for n in ("n1", "n2", "n3")]))
        plans = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.shard-plans", 7))]
        assert plans[6]["released"] and plans[6]["epoch"] == 4  # the acks and the loss are on two topics: in turn
        asyncio.run(produce_all(kafka, [(events, key, _event("NodeLost", node="n3"))]))
        plans = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, f"{unique}.shard-plans", 8))]
        assert plans[7]["epoch"] == 5 and plans[7]["ranges"] == {"n1": [[1, 1150]], "n2": [[1151, 2300]]}

        shown = tribunal("shards", "state", "--job-set", JS, env=worker_env).stdout
        assert "epoch 5 (lost: -n3), awaiting n1, n2" in shown and "1151-2300" in shown, shown
        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=worker_env).stdout
        assert "verified:" in verified and "agree" in verified
        why = tribunal("audit", "explain", "--job-set", JS, "--epoch", "4", env=worker_env).stdout
        assert "avg = 2300 // 3 = 766" in why and "k=1 n2 (10.0.0.2:9000): 767-1532" in why, why

        page = tmp_path / "report.html"
        tribunal("audit", "report", "--job-set", JS, "--output", str(page), env=worker_env)
        dom = assert_shows_plots(page, tmp_path, 2)
        assert "Task ranges per node over time" in dom and "awaiting n1, n2" in dom
        assert worker.alive
