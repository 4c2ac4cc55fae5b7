"""`tribunal topics`, `tribunal worker` and `tribunal run`: the topics and the Faust worker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streams.cli.base import (
    Bootstrap,
    Prefix,
    cli,
    settings_from,
    topics_cli,
)
from streams.settings import Settings


# -- topics -----------------------------------------------------------------------------------
@topics_cli.command("create")
def topics_create(bootstrap: Bootstrap = None, topic_prefix: Prefix = None,
                  partitions: Annotated[int | None, typer.Option(min=1)] = None) -> None:
    """Create every missing tribunal topic with its partitions and settings, and give existing ones the settings
    (cleanup policy; the broker's time on the clocked folds' inputs)."""
    from streams.topics import create_topics

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix, partitions=partitions)
    made = create_topics(settings, change=True)
    typer.echo("created: " + (", ".join(made) if made else "nothing (all exist)"))


@topics_cli.command("list")
def topics_list(topic_prefix: Prefix = None) -> None:
    """Print the topics tribunal uses, with their cleanup policy."""
    from streams.topics import catalogue

    for spec in catalogue(settings_from(topic_prefix=topic_prefix)):
        typer.echo(f"{spec.name:<32} {spec.config()['cleanup.policy']}")


# -- worker -----------------------------------------------------------------------------------
@cli.command("worker")
def worker(bootstrap: Bootstrap = None, topic_prefix: Prefix = None,
           app_id: Annotated[str | None, typer.Option(help="Faust app id (consumer group)")] = None,
           web_port: Annotated[int | None, typer.Option(help=(
               "Port of the worker's web endpoint, on $TRIBUNAL_WEB_HOST (default 127.0.0.1: loopback only). It "
               "serves every key's state (pools, groups, namespaces and their jobs, job sets) and /metrics, "
               "unauthenticated: reach it from elsewhere through the dispatcher's API or a proxy that "
               "authenticates"))] = None,
           data_dir: Annotated[Path | None, typer.Option(help="Where table state is kept")] = None,
           partitions: Annotated[int | None, typer.Option(min=1)] = None,
           log_level: Annotated[str | None, typer.Option()] = None) -> None:
    """Run the Faust worker in the foreground (creates missing topics first)."""
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix, app_id=app_id,
                             web_port=web_port, data_dir=data_dir, partitions=partitions, log_level=log_level)
    from streams.worker.run import run as run_worker

    run_worker(settings)


@cli.command("run")
def run() -> None:
    """Start the local Kafka + ZooKeeper (if needed) and the worker: the embedded default."""
    from streams.infra import Cluster, Topology

    cluster = Cluster(Topology.default())
    cluster.up()
    settings = Settings()
    typer.echo(f"kafka {cluster.topology.bootstrap} and zookeeper {cluster.topology.zookeeper_hosts} are up.\n"
               "In another shell, give pool-a a policy, send a metric, and watch the decision:\n"
               "  .venv/bin/tribunal pools policy apply examples/decider-pool-a.yaml --pool pool-a\n"
               "  .venv/bin/tribunal pools metric ats 75 --pool pool-a\n"
               "  .venv/bin/tribunal topics tail scaling-decisions --from-beginning\n"
               "Stop with Ctrl-C, then `make down`.", err=True)
    from streams.worker.run import run as run_worker

    run_worker(settings)
