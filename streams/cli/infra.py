"""`tribunal infra`: the local Kafka and ZooKeeper servers, from Maven jars, on 127.0.0.1 (or `--host`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from streams.cli.base import (
    Bootstrap,
    Prefix,
    acl_cli,
    infra_cli,
    settings_from,
)

# -- infra ------------------------------------------------------------------------------------
Brokers = Annotated[int, typer.Option("--brokers", min=1, max=9, help="Brokers in the KRaft cluster")]
Home = Annotated[Path | None, typer.Option("--home", help="Data, logs and pid files (default .tribunal/)")]
KafkaPort = Annotated[int | None, typer.Option("--kafka-port", help="First broker's port")]
ControllerPort = Annotated[int | None, typer.Option("--controller-port", help="First controller's port")]
ZkPort = Annotated[int | None, typer.Option("--zk-port", help="ZooKeeper's client port")]
Host = Annotated[str, typer.Option("--host", help="The address ZooKeeper and the brokers listen on and advertise: "
                                  "127.0.0.1, or one of this machine's that other network namespaces reach")]
Secure = Annotated[bool, typer.Option("--secure", help="The secured stack: SASL_SSL with SCRAM users, a local CA "
                                      "and ACLs (in .tribunal/secure/, ports 9392, 19392 and 2183)")]


def _cluster(brokers: int, home: Path | None, kafka_port: int | None, controller_port: int | None,
             zk_port: int | None, secure: bool = False, host: str = "127.0.0.1") -> Any:
    import dataclasses

    from streams.infra import Cluster, Topology

    topology = Topology.default(brokers, home.resolve() if home else None, secure)
    return Cluster(dataclasses.replace(
        topology, kafka_port=topology.kafka_port if kafka_port is None else kafka_port,
        controller_port=topology.controller_port if controller_port is None else controller_port,
        zk_port=topology.zk_port if zk_port is None else zk_port, host=host))


@infra_cli.command("install")
def infra_install() -> None:
    """Resolve the Kafka and ZooKeeper jars from Maven Central into infra/lib (once)."""
    from streams.infra.install import install_jars, resolved_versions

    fetched = install_jars()
    versions = ", ".join(f"{k} {v}" for k, v in resolved_versions().items())
    typer.echo(("installed: " if fetched else "up to date: ") + versions)


@infra_cli.command("up")
def infra_up(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
             controller_port: ControllerPort = None, zk_port: ZkPort = None, secure: Secure = False,
             host: Host = "127.0.0.1") -> None:
    """Start ZooKeeper and the broker(s); harmless when they already run."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port, secure, host)
    timings = cluster.up()
    for name, seconds in timings.items():
        typer.echo(f"{name:<10} " + (f"started in {seconds:.1f}s" if seconds else "already running"))
    typer.echo(f"kafka:     {cluster.topology.bootstrap}" + (" (SASL_SSL, SCRAM-SHA-512)" if secure else ""))
    typer.echo(f"zookeeper: {cluster.topology.zookeeper_hosts}")
    typer.echo(f"logs:      {cluster.log_dir}")
    if secure:
        credentials = cluster.topology.credentials
        typer.echo(f"CA:        {credentials.ca}")
        for user in ("admin", "worker", "producer", "auditor"):
            typer.echo(f"{user + ':':<10} set -a; . {credentials.env_file(user)}; set +a")
        typer.echo("then, as admin: tribunal topics create && tribunal infra acl apply")


@infra_cli.command("down")
def infra_down(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
               controller_port: ControllerPort = None, zk_port: ZkPort = None,
               purge: Annotated[bool, typer.Option(help="Also delete data and logs")] = False,
               secure: Secure = False, host: Host = "127.0.0.1") -> None:
    """Stop the brokers, then ZooKeeper, and wait until their ports are free."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port, secure, host)
    stopped = cluster.down()
    typer.echo("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    if purge:
        cluster.purge()
        typer.echo(f"purged:  {cluster.topology.home}")


@infra_cli.command("status")
def infra_status(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
                 controller_port: ControllerPort = None, zk_port: ZkPort = None, secure: Secure = False,
                 host: Host = "127.0.0.1") -> None:
    """Show each server's pid, port and resident memory; exit 1 unless all are up."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port, secure, host)
    rows = cluster.status()
    for s in rows:
        rss = f"{s.rss_kb / 1024:.0f} MiB" if s.rss_kb else "-"
        state = "up" if s.alive and s.listening else ("starting" if s.alive else "down")
        typer.echo(f"{s.name:<10} {state:<9} pid={s.pid or '-':<8} port={s.port:<6} rss={rss}")
    if not all(s.alive and s.listening for s in rows):
        raise typer.Exit(1)


@acl_cli.command("apply")
def acl_apply(
    worker: Annotated[str, typer.Option(help="The worker's principal (tribunal's daemons run as it too)")] = "worker",
    producer: Annotated[str, typer.Option(help="The principal business services produce inputs as")] = "producer",
    auditor: Annotated[str, typer.Option(help="The principal audits read as")] = "auditor",
    bootstrap: Bootstrap = None, topic_prefix: Prefix = None,
    app_id: Annotated[str | None, typer.Option(help="The worker's app id (default $TRIBUNAL_APP_ID)")] = None,
    print_only: Annotated[bool, typer.Option("--print", help="Print kafka-acls.sh commands instead")] = False,
) -> None:
    """Grant each principal the least it needs (streams/acl.py), connected as an operator allowed to."""
    from streams import acl
    from streams.infra import Cluster, Topology

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix, app_id=app_id)
    grants = acl.grants(settings, *(f"User:{name}" for name in (worker, producer, auditor)))
    if print_only:
        for line in acl.commands(settings, grants):
            typer.echo(line)
        return
    cluster = Cluster(Topology.default())
    acl.apply(settings, grants, cluster.jvm(None, 128))
    typer.echo(f"granted {len(grants)} sets of ACLs to {worker}, {producer} and {auditor}")
