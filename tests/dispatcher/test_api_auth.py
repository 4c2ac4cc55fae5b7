"""Who may do what through the dispatcher's API, live (a real worker, a real API, Kafka): every route against every
kind of caller, and afterwards the command topic holds exactly the allowed writes, each naming its sender; a
revocation holds from the next request; the rate, the body limit and the counts by outcome; TLS from curl."""

from __future__ import annotations

import datetime
import json
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from streams.dispatcher.auth import AuthFile
from tests.dispatcher.test_api import call, serving
from tests.helpers import Worker, tribunal, until

NS = "auth"
CALLERS = ("none", "unknown", "revoked", "reader", "tenant-w2", "admin-elsewhere", "tenant-w1", "admin")


def identities(path: Path) -> dict[str, str | None]:
    """A token for each kind of caller (None: no Authorization header at all)."""
    auth = AuthFile(path)
    tokens: dict[str, str | None] = {"none": None, "unknown": "trb_" + "x" * 43}
    tokens["revoked"] = auth.create("revoked", "admin", (NS,), None)
    auth.revoke("revoked")
    tokens["reader"] = auth.create("reader", "reader", (NS,), None)
    tokens["tenant-w1"] = auth.create("tenant-w1", "tenant", (NS,), "w1")
    tokens["tenant-w2"] = auth.create("tenant-w2", "tenant", (NS,), "w2")
    tokens["admin-elsewhere"] = auth.create("admin-elsewhere", "admin", ("elsewhere",), None)
    tokens["admin"] = auth.create("admin", "admin", (NS,), None)
    tokens["hasty"] = auth.create("hasty", "reader", (NS,), None)
    return tokens


def later() -> dict[str, Any]:
    """An assign of one job for w1 due in a day: it stays pending through the test."""
    start = int(time.time() * 1000) + 86_400_000
    return {"worker": "w1", "start": start, "end": start, "jobs": [{"external_id": "held"}]}


def expected(caller: str, route: str) -> int:
    """The status the matrix expects (see `routes`)."""
    if caller in ("none", "unknown", "revoked"):
        return 401
    if route == "metrics":
        return 200
    if caller == "admin-elsewhere":
        return 403
    reads = {"namespace": 200, "job": 200, "events": 200}
    writes = {"max-threads": 202, "worker-max": 202, "assign": 202, "finish": 202, "fail": 202, "cancel": 202}
    if caller == "admin":
        return {**reads, **writes}[route]
    if caller == "reader":
        return reads.get(route, 403)
    if caller == "tenant-w1":
        return {**reads, **writes, "max-threads": 403, "worker-max": 403}[route]
    # tenant-w2: the namespace's counts; another worker's job is not found; its events and assigns are refused
    return {"namespace": 200, "job": 404, "events": 403, "finish": 404, "fail": 404, "cancel": 404}.get(route, 403)


def routes(a: str, c: str) -> dict[str, tuple[str, str, Any]]:
    """Every route of the API; `a` and `c` are w1's pending jobs (c only for the cancels)."""
    ns = f"/namespaces/{NS}"
    return {"namespace": ("GET", ns, None), "job": ("GET", f"{ns}/jobs/{a}", None),
            "events": ("GET", f"{ns}/workers/w1/events", None), "metrics": ("GET", "/metrics", None),
            "max-threads": ("POST", f"{ns}/max-threads", {"max": 5}),
            "worker-max": ("POST", f"{ns}/workers/w1/max", {"max": 2}),
            "assign": ("POST", f"{ns}/assignments", later()),
            "finish": ("POST", f"{ns}/jobs/{a}/finish", None), "fail": ("POST", f"{ns}/jobs/{a}/fail", {"error": "x"}),
            "cancel": ("POST", f"{ns}/jobs/{c}/cancel", None)}


def status_of(base: str, method: str, path: str, body: Any, token: str | None) -> tuple[int, str, dict[str, str]]:
    """The status, content type and headers of one request (a stream's first bytes, then it is closed)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.headers.get_content_type() == "text/event-stream":
                assert response.readline().startswith(b"id: ")  # the ready event: the stream is positioned
            return response.status, response.headers.get_content_type(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_content_type(), dict(e.headers)


def commands(worker_env: dict[str, str], count: int) -> list[dict[str, Any]]:
    """The first `count` records of dispatch-commands, read back from Kafka."""
    tail = tribunal("topics", "tail", "dispatch-commands", "--json", "--from-beginning", "--max", str(count),
                    "--idle-timeout", "20", env=worker_env)
    return [json.loads(line)["value"] for line in tail.stdout.splitlines()]


def test_every_route_against_every_caller_and_only_the_allowed_writes_reach_kafka(
        worker_env: dict[str, str], worker: Worker, tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    tokens = identities(auth)
    with serving(worker_env, worker, tmp_path, "--auth-file", str(auth), "--rate", "10", "--burst", "30",
                 "--max-body", "4096") as (base, api):
        status, _, made = call(base, "POST", f"/namespaces/{NS}/assignments",
                               {**later(), "jobs": [{"external_id": "a"}, {"external_id": "c"}]},
                               token=tokens["admin"])
        assert status == 202, made
        a, c = made["uuids"]
        until(lambda: call(base, "GET", f"/namespaces/{NS}/jobs/{c}", token=tokens["admin"])[0] == 200,
              "the assign to be folded")
        allowed: list[tuple[str, str]] = [("JobsAssigned", "admin")]
        kinds = {"max-threads": "MaxThreadsSet", "worker-max": "WorkerMaxSet", "assign": "JobsAssigned",
                 "finish": "JobFinished", "fail": "JobFailed", "cancel": "JobCancelled"}
        seen = {}
        for caller in CALLERS:
            for route, (method, path, body) in routes(a, c).items():
                status, kind, headers = status_of(base, method, path, body, tokens[caller])
                seen[(caller, route)] = status
                want = expected(caller, route)
                assert status == want, (caller, route, status, want)
                if status >= 400:
                    assert kind == "application/problem+json", (caller, route, kind)
                if status == 401:
                    assert headers.get("WWW-Authenticate", "").startswith("Bearer"), headers
                if status == 202:
                    allowed.append((kinds[route], caller))
        assert sorted(set(seen.values())) == [200, 202, 401, 403, 404]

        # the command topic: exactly the allowed writes, in order, each naming who sent it
        written = commands(worker_env, len(allowed) + 1)  # one more than allowed: none may be there
        assert [(v["type"], v.get("principal")) for v in written] == allowed
        assert all(v["namespace"] == NS for v in written)

        # a revocation holds from the next request, without a restart
        assert call(base, "GET", f"/namespaces/{NS}", token=tokens["reader"])[0] == 200
        tribunal("dispatch", "api", "token", "revoke", "reader", "--auth-file", str(auth))
        assert call(base, "GET", f"/namespaces/{NS}", token=tokens["reader"])[0] == 401

        # a body past the limit: 413; a caller past its rate: 429 with Retry-After
        status, kind, problem = call(base, "POST", f"/namespaces/{NS}/assignments",
                                     {**later(), "jobs": [{"external_id": "x" * 190}] * 30}, token=tokens["admin"])
        assert (status, kind) == (413, "application/problem+json"), problem
        answers = [status_of(base, "GET", "/metrics", None, tokens["hasty"]) for _ in range(45)]
        limited = [headers for status, _, headers in answers if status == 429]
        assert limited and all(int(h["Retry-After"]) >= 1 for h in limited)

        # what a tenant reads of the namespace: the counts, and of the workers and jobs only its own
        status, _, page = call(base, "GET", f"/namespaces/{NS}", token=tokens["tenant-w2"])
        assert status == 200 and set(page["workers"]) <= {"w2"} and page["jobs"] == [] and page["pending"] >= 1
        status, _, page = call(base, "GET", f"/namespaces/{NS}/jobs/{a}", token=tokens["admin"])
        assert page["assigned_by"] == "admin"  # jobs show, through the worker: who assigned it

        # the counts by outcome and identity; no token nor hash anywhere an operator looks
        metrics = urllib.request.urlopen(urllib.request.Request(
            base + "/metrics", headers={"Authorization": f"Bearer {tokens['admin']}"}), timeout=10).read().decode()
        families = {f.name: f for f in text_string_to_metric_families(metrics)}
        by: dict[tuple[str, str], float] = {}
        for sample in families["tribunal_api_requests"].samples:
            if sample.name.endswith("_total"):
                key = (sample.labels["status"], sample.labels["principal"])
                by[key] = by.get(key, 0) + sample.value
        for status_code in ("401", "403", "413", "429"):
            assert any(k[0] == status_code for k in by), status_code
        assert by[("401", "-")] >= 30 and by[("403", "admin-elsewhere")] == 9 and by[("429", "hasty")] >= 1
        secrets = [t for t in tokens.values() if t] + [json.loads(auth.read_text())["identities"][0]["hash"]]
        for text in (metrics, api.log(), worker.log()):
            assert not any(secret in text or secret.removeprefix("sha256:") in text for secret in secrets)
        assert api.alive and worker.alive


def _certificate(name: str, issuer: Any = None, server: bool = False) -> tuple[Any, Any, str, str]:
    """A key and certificate for `name`, signed by `issuer` ((key, cert)) or by itself as a CA; PEM texts too."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer_key, signer_name = (issuer[0], issuer[1].subject) if issuer else (key, subject)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(signer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True))
    if server:
        import ipaddress

        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(
            "127.0.0.1"))]), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return key, cert, key_pem, cert.public_bytes(pem).decode()


def test_tls_from_curl_with_a_token_or_a_client_certificate_and_plaintext_refused(
        worker_env: dict[str, str], tmp_path: Path) -> None:
    """Debian's curl against `--tls-cert/--tls-key/--tls-client-ca`: a token over HTTPS, a client certificate
    standing for the identity its common name names, one from another CA refused in the handshake, plain HTTP to
    the TLS port refused. (No worker: /metrics needs an identity and no worker, which is all this asks.)"""
    ca = _certificate("test CA")
    stranger_ca = _certificate("stranger CA")
    files = {}
    for name, (key_pem, cert_pem) in {
            "ca": ("", ca[3]), "server": _certificate("127.0.0.1", ca, server=True)[2:],
            "client": _certificate("tenant-cert", ca)[2:], "stranger": _certificate("tenant-cert", stranger_ca)[2:]
    }.items():
        (tmp_path / f"{name}.pem").write_text(cert_pem)
        if key_pem:
            (tmp_path / f"{name}.key").write_text(key_pem)
        files[name] = tmp_path / f"{name}.pem"
    auth = tmp_path / "auth.json"
    token = AuthFile(auth).create("ops", "reader", (NS,), None)
    AuthFile(auth).create("tenant-cert", "tenant", (NS,), "w1")
    context = ssl.create_default_context(cafile=str(files["ca"]))
    with serving(worker_env, None, tmp_path, "--auth-file", str(auth), "--tls-cert", str(files["server"]),
                 "--tls-key", str(tmp_path / "server.key"), "--tls-client-ca", str(files["ca"]), scheme="https",
                 context=context) as (base, api):
        def curl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", *args],
                                  capture_output=True, text=True, timeout=60)

        metrics = f"{base}/metrics"
        assert curl("--cacert", str(files["ca"]), "-H", f"Authorization: Bearer {token}", metrics).stdout == "200"
        assert curl("--cacert", str(files["ca"]), metrics).stdout == "401"
        by_cert = curl("--cacert", str(files["ca"]), "--cert", str(files["client"]), "--key",
                       str(tmp_path / "client.key"), metrics)
        assert by_cert.stdout == "200", by_cert
        stranger = curl("--cacert", str(files["ca"]), "--cert", str(files["stranger"]), "--key",
                        str(tmp_path / "stranger.key"), metrics)
        assert stranger.returncode != 0 and stranger.stdout == "000", stranger  # refused in the handshake
        unverified = curl(metrics)  # the server's CA not trusted: curl refuses it
        assert unverified.returncode == 60, unverified
        plain = curl(base.replace("https:", "http:") + "/metrics")
        assert plain.returncode != 0 and plain.stdout == "000", plain
        page = urllib.request.urlopen(urllib.request.Request(metrics, headers={"Authorization": f"Bearer {token}"}),
                                      timeout=10, context=context).read().decode()
        samples = [s for f in text_string_to_metric_families(page) if f.name == "tribunal_api_requests"
                   for s in f.samples if s.name.endswith("_total")]
        assert any(s.labels["principal"] == "tenant-cert" and s.labels["status"] == "200" for s in samples), page
        assert api.alive
