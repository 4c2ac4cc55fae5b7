"""The secured stack (`tribunal infra up --secure`): SASL_SSL with SCRAM users, a local CA, ACLs from
`tribunal infra acl apply`, and ZooKeeper nodes only tribunal's services may change.

One stack for the module. The worker, the CLI, the ZooKeeper bridge and a scheduler run as an operator
would run them, each with its principal's `.env` file; the refusals come from the broker and ZooKeeper.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams import kafka
from streams.infra.cluster import Cluster, _port_open
from streams.infra.secure import Credentials, _certificates
from streams.infra.topology import Topology, free_ports
from streams.settings import Settings
from tests.helpers import TRIBUNAL, Service, Worker, tribunal, until, wait_until_ready

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

EXAMPLE_POLICY = Path(__file__).resolve().parents[2] / "examples" / "decider-pool-a.yaml"


class Stack:
    def __init__(self, home: Path) -> None:
        zk, broker, controller = free_ports(3)
        self.ports = ["--home", str(home), "--zk-port", str(zk), "--kafka-port", str(broker),
                      "--controller-port", str(controller)]
        self.cluster = Cluster(Topology(home=home / "secure", kafka_port=broker, controller_port=controller,
                                        zk_port=zk, secure=True))
        self.credentials: Credentials = self.cluster.topology.credentials

    def env(self, user: str, prefix: str, **more: str) -> dict[str, str]:
        """`tribunal` run as `user`, with only its `.env` file's settings (none inherited from this process)."""
        import os

        plain = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_") and k != "KAFKA_BOOTSTRAP"}
        return {**plain, **self.credentials.env(user), "TRIBUNAL_KAFKA_BOOTSTRAP": self.cluster.topology.bootstrap,
                "TRIBUNAL_ZOOKEEPER_HOSTS": self.cluster.topology.zookeeper_hosts, "TRIBUNAL_TOPIC_PREFIX": prefix,
                "TRIBUNAL_APP_ID": prefix.rstrip("."), "TRIBUNAL_PARTITIONS": "2", **more}

    def settings(self, user: str) -> Settings:
        return Settings.model_validate(self.credentials.settings(user))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("secure"))
    up = tribunal("infra", "up", "--secure", *s.ports)
    assert "SASL_SSL" in up.stdout and str(s.credentials.env_file("worker")) in up.stdout
    try:
        yield s
    finally:
        tribunal("infra", "down", "--secure", *s.ports)


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`tribunal ARGS` that may fail."""
    return subprocess.run([TRIBUNAL, *args], env=env, capture_output=True, text=True, timeout=120)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tribunal: "), done.stderr
    return lines[0]


def test_credential_files_are_private_and_settings_never_print_a_password(stack: Stack) -> None:
    broker_config = stack.cluster.servers()[1].config  # holds the broker's and the controller's passwords
    for path in (stack.credentials.users_file, stack.credentials.keystore, stack.credentials.env_file("worker"),
                 broker_config):
        assert path.stat().st_mode & 0o077 == 0, path
    password = stack.credentials.passwords()["worker"]
    assert password not in repr(stack.settings("worker"))  # SecretStr: never printed with the settings


def test_worker_cli_bridge_and_scheduler_work_over_sasl_ssl_with_least_rights(stack: Stack, unique: str,
                                                                              tmp_path: Path) -> None:
    p = f"{unique}."
    admin, producer, auditor = (stack.env(u, p) for u in ("admin", "producer", "auditor"))
    [web] = free_ports(1)
    worker_env = stack.env("worker", p, TRIBUNAL_DATA_DIR=str(tmp_path / "worker"), TRIBUNAL_WEB_PORT=str(web))
    tribunal("topics", "create", env=admin)
    assert "granted" in tribunal("infra", "acl", "apply", env=admin).stdout

    worker = Worker(worker_env, tmp_path / "worker.log")
    worker.start()
    services: list[Service] = [worker]
    try:
        wait_until_ready(worker, 1)
        tribunal("pools", "policy", "apply", str(EXAMPLE_POLICY), "--pool", "pool-a", env=admin)
        tribunal("pools", "metric", "ats", "90", "--pool", "pool-a", env=producer)
        decisions = tribunal("topics", "tail", "scaling-decisions", "--json", "--from-beginning", "--max", "2",
                             "--idle-timeout", "60", env=auditor)
        causes = [json.loads(line)["value"]["cause"]["topic"] for line in decisions.stdout.splitlines()]
        assert causes == [p + "policies", p + "plugin_decider"]  # the policy's own decision, then the metric's
        assert "agree" in tribunal("audit", "replay", "--from-kafka", "--verify", env=auditor).stdout

        root = f"/{unique}"
        for name, args in (("bridge", ("groups", "bridge", "--root", root, "--snapshot-interval", "2")),
                           ("scheduler", ("groups", "scheduler", "--group", "g", "--id", "A", "--root", root,
                                          "--run-log", str(tmp_path / "runs.jsonl")))):
            service = Service(worker_env, tmp_path / f"{name}.log", *args)
            service.start()
            services.append(service)
        limits = tribunal("topics", "tail", "rejection-limits", "--json", "--from-beginning", "--max", "1",
                          "--idle-timeout", "90", env=auditor)
        [limit] = [json.loads(line) for line in limits.stdout.splitlines()]
        assert limit["key"] == "g/A", [s.log()[-2000:] for s in services]

        registration = _registration(stack, root)
        _assert_zookeeper_refuses_to_delete(stack, registration)
    finally:
        for service in services:
            service.stop()


def _registration(stack: Stack, root: str) -> str:
    """The scheduler's node, read by a client signed in as tribunal's services."""
    from streams.zk.client import client

    zk = client(stack.cluster.topology.zookeeper_hosts, settings=stack.settings("worker"))
    zk.start(timeout=30)
    try:
        found: list[str] = until(lambda: [f"{path}/{child}" for path in _walk(zk, root)
                                          for child in zk.get_children(path) if child.startswith("A")],
                                 f"a node of scheduler A under {root}", 60, every=0.3)
        return found[0]
    finally:
        zk.stop()
        zk.close()


def _walk(zk: Any, path: str) -> list[str]:
    return [path, *(p for child in zk.get_children(path) for p in _walk(zk, f"{path}/{child}"))]


def _assert_zookeeper_refuses_to_delete(stack: Stack, node: str) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    stranger = KazooClient(hosts=stack.cluster.topology.zookeeper_hosts)
    stranger.start(timeout=30)
    try:
        assert stranger.get(node) is not None  # anyone may read
        with pytest.raises(NoAuthError):
            stranger.delete(node)
        with pytest.raises(NoAuthError):
            stranger.set(node, b"moved")
    finally:
        stranger.stop()
        stranger.close()


def test_a_producer_can_neither_set_policies_nor_forge_decisions(stack: Stack, unique: str) -> None:
    p = f"{unique}."
    admin, producer = stack.env("admin", p), stack.env("producer", p)
    tribunal("topics", "create", env=admin)
    tribunal("infra", "acl", "apply", env=admin)

    refused = one_line_error(run(producer, "pools", "policy", "apply", str(EXAMPLE_POLICY), "--pool", "pool-a"))
    assert "TopicAuthorizationFailed" in refused and p + "policies" in refused

    async def forge() -> None:
        forger = kafka.producer(stack.cluster.topology.bootstrap, **kafka.security(stack.settings("producer")))
        await forger.start()
        try:
            await forger.send_and_wait(p + "scaling-decisions", b"{}", key=b"pool-a")
        finally:
            await forger.stop()

    from aiokafka.errors import TopicAuthorizationFailedError

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(forge())
    settings = stack.credentials.settings("producer")
    kcat = subprocess.run(["kcat", "-P", "-b", stack.cluster.topology.bootstrap, "-t", p + "scaling-decisions",
                           "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
                           "-X", f"sasl.username={settings['sasl_username']}",
                           "-X", f"sasl.password={settings['sasl_password']}",
                           "-X", f"ssl.ca.location={stack.credentials.ca}"],
                          input="forged\n", capture_output=True, text=True, timeout=60)
    assert "Topic authorization failed" in kcat.stderr, kcat  # a third-party client, refused alike
    assert "sent to" in tribunal("pools", "metric", "ats", "50", "--pool", "pool-a",
                                 env=producer).stdout  # its own topics


def test_a_wrong_password_or_an_untrusted_broker_is_one_line_and_exit_1(stack: Stack, unique: str,
                                                                        tmp_path: Path) -> None:
    p = f"{unique}."
    wrong = one_line_error(run(stack.env("producer", p, TRIBUNAL_SASL_PASSWORD="not-it"),
                               "pools", "metric", "ats", "5"))
    assert "SaslAuthenticationFailed" in wrong or "invalid credentials" in wrong, wrong

    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(_certificates()[0])
    untrusted = one_line_error(run(stack.env("producer", p, TRIBUNAL_SSL_CAFILE=str(other_ca)),
                                   "pools", "metric", "ats", "5"))
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted, untrusted

    missing = one_line_error(run(stack.env("producer", p, TRIBUNAL_SSL_CAFILE=str(tmp_path / "nowhere.pem")),
                                 "pools", "metric", "ats", "5"))
    assert "cannot load the TLS files" in missing


def test_a_broker_with_an_expired_certificate_is_one_line_and_exit_1(stack: Stack, unique: str,
                                                                     tmp_path: Path) -> None:
    """A broker whose certificate ran out while it was serving, signed by a CA the client trusts: expiry is the
    only fault.

    Kafka will not start with a certificate its own truststore rejects (it first tries a handshake with
    itself), so the broker's truststore here also holds the expired certificate itself: Java does not check a
    trust anchor's dates. Everything is restored afterwards, so the module's tests may run in any order."""
    broker = stack.cluster.servers()[1]
    files = (stack.credentials.keystore, stack.credentials.ca)
    kept = [f.read_bytes() for f in files]
    ca_pem, expired_keystore = _certificates(expired=True)
    trusted = tmp_path / "ca-of-the-expired.pem"
    trusted.write_text(ca_pem)
    stack.cluster.kill(broker)
    try:
        stack.credentials.keystore.write_text(expired_keystore)
        certificate = expired_keystore[expired_keystore.index("-----BEGIN CERTIFICATE-----"):]
        stack.credentials.ca.write_bytes(kept[1] + certificate.encode())
        pid = stack.cluster._start(broker)
        stack.cluster._wait(broker, pid, lambda: _port_open(broker.port), 120)
        expired = one_line_error(run(stack.env("producer", f"{unique}.", TRIBUNAL_SSL_CAFILE=str(trusted)),
                                     "pools", "metric", "ats", "5"))
        assert "certificate has expired" in expired, expired
    finally:
        stack.cluster.kill(broker)
        for f, content in zip(files, kept, strict=True):
            f.write_bytes(content)
        stack.cluster.start(broker)


def test_a_tenant_runs_its_jobs_through_the_api_with_a_token_and_no_kafka_user(stack: Stack, unique: str,
                                                                              tmp_path: Path) -> None:
    """Issue 56: producers may no longer write the dispatcher's commands; a tenant's executor holds an API token
    and no Kafka user at all, and its jobs run, each report naming it. The API runs as tribunal's daemons do."""
    import os
    import time

    from streams.dispatcher.auth import AuthFile
    from tests.dispatcher.test_api import answers, call

    p = f"{unique}."
    admin, producer, auditor = (stack.env(u, p) for u in ("admin", "producer", "auditor"))
    web, port = free_ports(2)
    worker_env = stack.env("worker", p, TRIBUNAL_DATA_DIR=str(tmp_path / "worker"), TRIBUNAL_WEB_PORT=str(web))
    tribunal("topics", "create", env=admin)
    tribunal("infra", "acl", "apply", env=admin)
    refused = one_line_error(run(producer, "dispatch", "jobs", "assign", "--namespace", "sec", "--worker", "w1"))
    assert "TopicAuthorizationFailed" in refused and p + "dispatch-commands" in refused

    auth = tmp_path / "auth.json"
    ops = AuthFile(auth).create("ops", "admin", ("sec",), None)
    token_file = tmp_path / "tenant.token"
    token_file.write_text(AuthFile(auth).create("tenant-w1", "tenant", ("sec",), "w1"))
    token_file.chmod(0o600)
    base = f"http://127.0.0.1:{port}"
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_") and k != "KAFKA_BOOTSTRAP"}
    run_log = tmp_path / "runs.jsonl"
    services = [Worker(worker_env, tmp_path / "worker.log"),
                Service(worker_env, tmp_path / "api.log", "dispatch", "api", "--port", str(port), "--auth-file",
                        str(auth)),
                Service(worker_env, tmp_path / "ticker.log", "dispatch", "ticker", "--namespace", "sec", "--root",
                        f"/{unique}"),
                Service({**plain, "TRIBUNAL_KAFKA_BOOTSTRAP": "127.0.0.1:9"}, tmp_path / "executor.log", "dispatch",
                        "executor",
                        "--namespace", "sec", "--worker", "w1", "--seconds", "0.2", "--run-log", str(run_log),
                        "--api", base, "--token-file", str(token_file), "--state-dir", str(tmp_path / "executor"))]
    for service in services:
        service.start()
    try:
        wait_until_ready(services[0], 1)  # type: ignore[arg-type]
        until(lambda: answers(base), lambda: f"the API to answer: {services[1].log()}", 60)
        until((tmp_path / "executor" / "sec" / "w1" / "events.cursor").exists,
              lambda: f"the executor to follow its events: {services[3].log()}", 60)
        now = int(time.time() * 1000)
        status, _, body = call(base, "POST", "/namespaces/sec/assignments",
                               {"worker": "w1", "start": now, "end": now, "jobs": [{"external_id": "a"},
                                                                                   {"external_id": "b"}]}, token=ops)
        assert status == 202, body

        def finished() -> set[str]:
            lines = run_log.read_text().splitlines() if run_log.exists() else []
            return {json.loads(line)["uuid"] for line in lines if json.loads(line)["event"] == "finish"}

        until(lambda: finished() >= set(body["uuids"]), lambda: f"the jobs to run: {services[3].log()[-2000:]}", 90)
        tail = tribunal("topics", "tail", "dispatch-commands", "--json", "--from-beginning", "--max", "3",
                        "--idle-timeout",
                        "30", env=auditor)
        values = [json.loads(line)["value"] for line in tail.stdout.splitlines()]
        sent = [(v["type"], v.get("principal")) for v in values]
        assert sorted(sent) == [("JobFinished", "tenant-w1"), ("JobFinished", "tenant-w1"), ("JobsAssigned", "ops")]
    finally:
        for service in services:
            service.stop()
