"""The grants `tribunal infra acl apply` makes: the least each principal needs, and nothing that lets a producer set a
policy, a clock or a decision (the broker's refusals are tested on the secured stack, tests/infra/test_secure.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import SecretStr

from streams.acl import Grant, commands, grants, java_client_properties
from streams.errors import ConfigError
from streams.settings import Settings
from streams.topics import catalogue


def _by(all_grants: list[Grant], principal: str) -> dict[str, set[tuple[str, str, bool]]]:
    """Per operation, the (resource, name, prefixed) it is granted on."""
    out: dict[str, set[tuple[str, str, bool]]] = {}
    for g in all_grants:
        if g.principal == principal:
            for op in g.operations:
                out.setdefault(op, set()).update((g.resource, n, g.prefixed) for n in g.names)
    return out


def test_producers_write_reported_inputs_only() -> None:
    settings = Settings(topic_prefix="p.", app_id="tribunal")
    producer = _by(grants(settings, "User:w", "User:p", "User:a"), "User:p")
    assert set(producer) == {"Write", "Describe"}
    written = {name for _, name, _ in producer["Write"]}
    assert written == {"p.plugin_decider", "p.plugin_justice", "p.cluster-events", "p.scheduler-events",
                       "p.job-events", "p.shard-events", "p.shard-acks"}  # dispatch-commands: through the API
    assert all(not prefixed for _, _, prefixed in producer["Write"])


def test_auditors_read_every_topic_and_write_nothing() -> None:
    settings = Settings(topic_prefix="p.")
    auditor = _by(grants(settings, "User:w", "User:p", "User:a"), "User:a")
    assert set(auditor) == {"Read", "Describe"}
    assert {name for _, name, _ in auditor["Read"]} == {spec.name for spec in catalogue(settings)}


def test_the_worker_owns_its_app_ids_resources_and_no_one_elses() -> None:
    worker = _by(grants(Settings(app_id="blue"), "User:w", "User:p", "User:a"), "User:w")
    assert ("topic", "blue-pool-state-changelog", False) in worker["AlterConfigs"]  # it gives them their settings
    assert {name for kind, name, _ in worker["AlterConfigs"]} == {
        f"blue-{t}-changelog" for t in ("pool-state", "pool-policies", "group-state", "group-buckets", "dispatch-state",
                                        "dispatch-jobs", "shard-state")}
    assert not [g for g in worker.get("All", set())]  # no prefix that another app id could fall under
    assert [(kind, prefixed) for kind, _, prefixed in worker["Read"] if prefixed] == []
    assert worker["Read"] >= {("group", "blue", False)}
    assert ("transactional-id", "blue-", True) in worker["Write"]  # Faust's ids: `<app id>-<group>-<partition>`


def test_a_grant_is_one_acl_command_per_resource_kind() -> None:
    [line] = commands(Settings(kafka_bootstrap="b:9092"),
                      [Grant("User:w", "transactional-id", ("t-",), ("Write", "Describe"), prefixed=True)])
    assert line == ("kafka-acls.sh --bootstrap-server b:9092 --command-config client.properties --add "
                    "--allow-principal User:w --operation Write --operation Describe --transactional-id t- "
                    "--resource-pattern-type prefixed")


def test_a_properties_file_gives_java_the_password_as_it_is(tmp_path: Any) -> None:
    from streams.acl import _properties_line

    props = java_client_properties(Settings(security_protocol="SASL_SSL", sasl_username="ad\\min",
                                            sasl_password=SecretStr('p\\"w')))
    line = _properties_line("sasl.jaas.config", props["sasl.jaas.config"])
    path = tmp_path / "client.properties"
    path.write_text(line)
    # What Properties.load reads back (a backslash escapes the next character), then what JAAS unquotes.
    loaded = re.sub(r"\\(.)", r"\1", path.read_text().split("=", 1)[1].rstrip("\n"))
    user, password = re.findall(r'"((?:[^"\\]|\\.)*)"', loaded)
    assert [re.sub(r"\\(.)", r"\1", v) for v in (user, password)] == ["ad\\min", 'p\\"w']


def test_client_certificate_sign_in_is_refused_with_a_way_out() -> None:
    with pytest.raises(ConfigError, match="--print"):
        java_client_properties(Settings(security_protocol="SSL", ssl_certfile="/c.pem", ssl_keyfile="/k.pem"))


def test_the_operators_connection_as_java_properties_quotes_the_password() -> None:
    props = java_client_properties(Settings(security_protocol="SASL_SSL", sasl_username="admin",
                                            sasl_password=SecretStr('a"b'), ssl_cafile="/ca.pem"))
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="admin" password="a\\"b";')
    assert props["ssl.truststore.location"] == "/ca.pem" and props["sasl.mechanism"] == "SCRAM-SHA-512"
