"""The dispatcher's REST API live: writes answer 202 with their coordinates, reads come from the worker,
bad requests get problem bodies, and the served OpenAPI document is the checked-in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from schemas.export import OPENAPI
from streams.infra.topology import free_ports
from tests.helpers import Service, Worker, running, until, wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
FUZZ_SEED = 35


def call(base: str, method: str, path: str, body: Any = None, raw: bytes | None = None, token: str | None = None,
         context: Any = None) -> tuple[int, str, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return response.status, response.headers.get_content_type(), json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_content_type(), json.loads(e.read())


@contextmanager
def serving(worker_env: dict[str, str], worker: Worker | None, tmp_path: Path, *args: str,
            scheme: str = "http", context: Any = None) -> Iterator[tuple[str, Service]]:
    """`tribunal dispatch api ARGS` on a free port, answering, beside a worker that has its partitions."""
    [port] = free_ports(1)
    base = f"{scheme}://127.0.0.1:{port}"
    with running(Service(worker_env, tmp_path / "api.log", "dispatch", "api", "--port", str(port), *args)) as api:
        if worker is not None:
            wait_until_ready(worker, 1)
        until(lambda: answers(base, context), lambda: f"the API to answer: {api.log()}")
        yield base, api


def answers(base: str, context: Any = None) -> bool:
    try:
        call(base, "GET", "/openapi.json", context=context)
        return True
    except (urllib.error.URLError, ConnectionError):
        return False


def test_the_rest_api_writes_reads_and_refuses_with_problems(worker_env: dict[str, str], worker: Worker,
                                                            tmp_path: Path) -> None:
    with serving(worker_env, worker, tmp_path) as (base, api):
        status, _, served = call(base, "GET", "/openapi.json")
        assert status == 200 and served == json.loads(OPENAPI.read_text())

        status, _, body = call(base, "POST", "/namespaces/api/max-threads", {"max": 1})
        assert status == 202 and body["topic"].endswith("dispatch-commands") and body["offset"] >= 0
        jobs = [{"external_id": "x", "timeout_ms": 600_000}, {"external_id": "y"}]
        status, _, body = call(base, "POST", "/namespaces/api/assignments",
                               {"worker": "w1", "start": 0, "end": 10, "jobs": jobs, "request_id": "r-1"})
        assert status == 202 and len(body["uuids"]) == 2, body
        x, y = body["uuids"]

        # start 0 <= now: x starts with the assign, y waits for the cap
        until(lambda: (found := call(base, "GET", f"/namespaces/api/jobs/{x}"))[0] == 200
              and found[2]["status"] == "running", lambda: f"x to run: {worker.log()[-2000:]}")
        assert call(base, "GET", f"/namespaces/api/jobs/{y}")[2]["status"] == "startable"
        status, _, namespace = call(base, "GET", "/namespaces/api")
        assert status == 200 and (namespace["running"], namespace["pending"], namespace["max"]) == (1, 1, 1)

        status, _, _ = call(base, "POST", f"/namespaces/api/jobs/{x}/finish?attempt=1")
        assert status == 202
        until(lambda: call(base, "GET", f"/namespaces/api/jobs/{x}")[0] == 404, "x to leave the state (finished)")
        assert call(base, "GET", f"/namespaces/api/jobs/{y}")[2]["status"] == "running"

        # bad requests: problem bodies
        status, kind, problem = call(base, "POST", "/namespaces/api/assignments",
                                     {"worker": "w1", "start": 10, "end": 5, "jobs": jobs})
        assert (status, kind, problem["status"]) == (422, "application/problem+json", 422)
        assert "before start" in problem["detail"]
        status, kind, problem = call(base, "POST", "/namespaces/api/max-threads", {"max": -1})
        assert status == 422 and problem["errors"][0]["loc"] == ["max"]
        status, _, problem = call(base, "POST", "/namespaces/api/max-threads", raw=b"{not json")
        assert status == 422 and problem["title"] == "Unprocessable Content"
        status, kind, problem = call(base, "GET", "/namespaces/api/jobs/no-such-job")
        assert (status, kind) == (404, "application/problem+json") and "no-such-job" in problem["detail"]
        status, kind, problem = call(base, "GET", "/namespaces/never-seen")
        assert (status, kind, problem["status"]) == (404, "application/problem+json", 404)
        status, kind, _ = call(base, "GET", "/no/such/path")
        assert (status, kind) == (404, "application/problem+json")
        assert api.alive and worker.alive

        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as page:
            families = {f.name: f for f in text_string_to_metric_families(page.read().decode())}
        counted = {(s.labels["method"], s.labels["route"], s.labels["status"]): s.value  # no identities here: "-"
                   for s in families["tribunal_api_requests"].samples if s.name.endswith("_total")}
        assert counted[("POST", "/namespaces/{namespace}/assignments", "202")] == 1
        assert counted[("POST", "/namespaces/{namespace}/assignments", "422")] == 1
        assert counted[("GET", "/namespaces/{namespace}/jobs/{uuid}", "404")] >= 2
        assert "process_cpu_seconds" in families


def test_requests_are_taken_as_the_document_types_them(worker_env: dict[str, str], worker: Worker,
                                                       tmp_path: Path) -> None:
    """Found by schemathesis: booleans taken for integers, a required body missing, integers the document allows
    refused. An integer is a JSON number (`5.0` too), never `false` or `"5"`; every integer has its bounds."""
    with serving(worker_env, worker, tmp_path) as (base, _):
        for path in ("/namespaces/api/max-threads", "/namespaces/api/workers/w1/max"):
            for bad in (False, True, "5", 1.5, -1, 1 << 63):
                status, _, problem = call(base, "POST", path, {"max": bad})
                assert status == 422 and problem["errors"][0]["loc"] == ["max"], (path, bad, problem)
            assert [call(base, "POST", path, {"max": good})[0] for good in (0, 5.0, (1 << 63) - 1)] == [202] * 3
        jobs = [{"external_id": "x", "max_retries": False}]
        status, _, problem = call(base, "POST", "/namespaces/api/assignments", {"worker": "w", "start": 0, "end": 0,
                                                                                 "jobs": jobs})
        assert status == 422 and problem["errors"][0]["loc"] == ["jobs", 0, "max_retries"], problem
        status, _, problem = call(base, "POST", "/namespaces/api/jobs/some-job/fail")  # its body is required
        assert status == 422 and "body" in problem["detail"], problem
        assert call(base, "POST", "/namespaces/api/jobs/some-job/fail", {})[0] == 202  # with every field defaulted
        for bad in ("0", "x", "1.5", "1002"):
            status, _, problem = call(base, "POST", f"/namespaces/api/jobs/some-job/finish?attempt={bad}")
            assert status == 422 and "attempt" in problem["detail"], (bad, problem)
        document = call(base, "GET", "/openapi.json")[2]
        timeout = document["components"]["schemas"]["JobSpec"]["properties"]["timeout_ms"]
        assert (timeout["minimum"], timeout["maximum"]) == (1, 366 * 24 * 3600 * 1000)
        assert document["paths"]["/namespaces/{namespace}"]["get"]["parameters"][0]["schema"] == {
            "type": "string", "minLength": 1, "maxLength": 200}


def test_the_api_keeps_its_openapi_contract_under_a_fuzzer(worker_env: dict[str, str], worker: Worker,
                                                           tmp_path: Path) -> None:
    """schemathesis, a third-party OpenAPI fuzzer, with every check it has (a request without the token among
    them: 401 expected), on a fixed seed (a failure reproduces with the command it prints), as an admin: 0
    failures."""
    from streams.dispatcher.auth import AuthFile

    auth = tmp_path / "auth.json"
    token = AuthFile(auth).create("fuzzer", "admin", ("*",), None)
    with serving(worker_env, worker, tmp_path, "--auth-file", str(auth), "--rate", "10000", "--burst", "10000") as (
            base, api):
        hooks = {"SCHEMATHESIS_HOOKS": str(ROOT / "schemas" / "openapi" / "dispatcher_api_hooks.py")}
        # the event stream never ends (a fuzzer would wait on it for good): its own tests are in test_api_auth.py
        done = subprocess.run([str(Path(sys.executable).parent / "schemathesis"), "run", f"{base}/openapi.json",
                               "--checks", "all", "--seed", str(FUZZ_SEED), "--max-examples", "40", "--workers", "1",
                               "--generation-database", "none", "--no-color", "-H", f"Authorization: Bearer {token}",
                               "--exclude-path-regex", "/events$"],
                              env={**os.environ, **hooks}, cwd=tmp_path, capture_output=True, text=True, timeout=480)
        report = done.stdout + done.stderr
        assert done.returncode == 0 and "No issues found" in report, report[-8000:]
        assert "8 passed" in report  # every operation but the stream was tried
        assert api.alive and worker.alive
        assert token not in api.log()
