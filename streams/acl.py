"""The least each principal needs on a cluster with ACLs, and granting it with Kafka's own ACL command.

Three principals, named by the operator (`tribunal infra acl apply --worker ... --producer ... --auditor ...`):

* the worker (and tribunal's other daemons, which run as it: the ZooKeeper bridge, the ticker,
  schedulers): reads and writes tribunal's topics (the bridge and the ticker produce inputs, the
  worker forwards records to its repartition topics and dead-letters bad ones), its changelogs (named
  one by one: it makes them and gives them their settings, `declare_topics`), its consumer group, and
  the transactional ids Faust names `<app id>-...` (a prefix: app ids must not begin with another
  deployment's app id and a dash);
* producers: write the inputs business services and schedulers report on, but not `policies` (a pool's
  policy is the operator's to set), `ticks` (the worker's time, from tribunal's ticker) nor
  `dispatch-commands` (a tenant's jobs and the caps: written by the dispatcher's API, a tribunal daemon,
  for the identity it authenticated, whom each command names; tenants hold API tokens, not Kafka users),
  and nothing else: no decision can be forged;
* auditors: read every topic of the catalogue, write nothing (replay, explain and verify read without a
  consumer group).

An operator (a super user, or one allowed to alter ACLs) applies them. `aiokafka` has no ACL calls, so
they go through `kafka.admin.AclCommand`, the class behind `kafka-acls.sh`, from the jars `tribunal infra
install` fetched; `--print` shows the same as `kafka-acls.sh` commands for any other cluster.
"""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from streams.core.folds import FOLDS
from streams.errors import ConfigError, TribunalError
from streams.kafka import PLAIN_LOGIN, SCRAM_LOGIN, sasl_login
from streams.settings import Settings
from streams.topics import catalogue, input_topics

NOT_REPORTED = ("policies", "ticks", "dispatch-commands")  # inputs only the operator or tribunal itself writes


@dataclass(frozen=True)
class Grant:
    """Operations allowed to a principal on some resources of one kind."""

    principal: str
    resource: str  # an AclCommand option: "topic", "group", "transactional-id"
    names: tuple[str, ...]
    operations: tuple[str, ...]
    prefixed: bool = False

    def arguments(self) -> list[str]:
        """This grant as AclCommand (`kafka-acls.sh`) arguments, after the connection's."""
        args = ["--add", "--allow-principal", self.principal]
        args += [a for op in self.operations for a in ("--operation", op)]
        args += [a for name in self.names for a in (f"--{self.resource}", name)]
        return args + (["--resource-pattern-type", "prefixed"] if self.prefixed else [])


def grants(settings: Settings, worker: str, producer: str, auditor: str) -> list[Grant]:
    """Every grant of the three principals (`User:name`), for `settings`' app id and topic prefix."""
    topics = tuple(sorted(spec.name for spec in catalogue(settings)))
    kept = {settings.topic(t) for t in NOT_REPORTED}
    reported = tuple(sorted(t for t in input_topics(settings) if t not in kept))
    owned = f"{settings.app_id}-"
    names = [t.name for fold in FOLDS for t in fold.tables] + [p.name for fold in FOLDS for p in fold.parts]
    changelogs = tuple(sorted(f"{owned}{name}-changelog" for name in names))
    return [
        Grant(worker, "topic", topics, ("Read", "Write", "Describe", "Create", "DescribeConfigs")),
        Grant(worker, "topic", changelogs, ("Read", "Write", "Describe", "Create", "DescribeConfigs", "AlterConfigs")),
        Grant(worker, "group", (settings.app_id,), ("Read", "Describe")),
        Grant(worker, "transactional-id", (owned,), ("Write", "Describe"), prefixed=True),
        Grant(producer, "topic", reported, ("Write", "Describe")),
        Grant(auditor, "topic", topics, ("Read", "Describe")),
    ]


def java_client_properties(settings: Settings) -> dict[str, str]:
    """`settings`' connection as a Java client's properties (for Kafka's own tools)."""
    props: dict[str, str] = {"security.protocol": settings.security_protocol}
    if settings.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        module = PLAIN_LOGIN if settings.sasl_mechanism == "PLAIN" else SCRAM_LOGIN
        user, password = (_jaas_quoted(v) for v in sasl_login(settings, "SASL"))
        props |= {"sasl.mechanism": settings.sasl_mechanism,
                  "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'}
    elif settings.ssl_certfile is not None:
        raise ConfigError("tribunal infra acl apply signs in with SASL only; with a client certificate, run the "
                          "commands `--print` shows")
    if settings.security_protocol in ("SSL", "SASL_SSL") and settings.ssl_cafile is not None:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(settings.ssl_cafile)}
    return props


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _properties_line(key: str, value: str) -> str:
    """`key=value` as Java's `Properties.load` reads it back (a backslash escapes the next character)."""
    return f"{key}={value.replace(chr(92), chr(92) * 2)}\n"


def commands(settings: Settings, all_grants: list[Grant]) -> list[str]:
    """The grants as `kafka-acls.sh` command lines (with a `client.properties` of the operator's connection)."""
    head = ["kafka-acls.sh", "--bootstrap-server", settings.kafka_bootstrap, "--command-config", "client.properties"]
    return [shlex.join(head + g.arguments()) for g in all_grants]


def apply(settings: Settings, all_grants: list[Grant], java: list[str]) -> None:
    """Add every grant through `kafka.admin.AclCommand` (`java`: the JVM command line, up to the class name),
    connecting as `settings` say; adding an ACL that exists already is a no-op."""
    with tempfile.TemporaryDirectory(prefix="tribunal-acl-") as tmp:
        config = Path(tmp) / "client.properties"
        config.touch(mode=0o600)
        config.write_text("".join(_properties_line(k, v) for k, v in java_client_properties(settings).items()))
        for grant in all_grants:
            cmd = [*java, "kafka.admin.AclCommand", "--bootstrap-server", settings.kafka_bootstrap,
                   "--command-config", str(config), *grant.arguments()]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if done.returncode != 0 or "Error while executing ACL command" in done.stdout + done.stderr:
                last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
                raise TribunalError(f"granting {grant.principal} {'/'.join(grant.operations)} on "
                                    f"{grant.resource} {', '.join(grant.names)} failed: {last[0]}")
