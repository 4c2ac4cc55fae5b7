"""Scheduler groups: `tribunal groups bridge`, `tribunal groups scheduler`, `tribunal groups rebalance`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from streams.cli.base import (
    Bootstrap,
    Prefix,
    Root,
    SessionTimeout,
    ZkHosts,
    groups_cli,
    open_file,
    serve,
    serve_until_stopped,
    settings_from,
)
from streams.errors import TribunalError

# -- scheduler groups: the ZooKeeper bridge, a scheduler, manual balancing ------------------------

@groups_cli.command("bridge")
def zk_bridge(bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
              root: Root = "/tribunal",
              snapshot_interval: Annotated[float, typer.Option(help="Seconds between full snapshots")] = 30.0,
              drop_watch_events: Annotated[float, typer.Option(
                  min=0.0, max=1.0, help="Share of watch events to drop, for tests (never snapshots)")] = 0.0,
              session_timeout: SessionTimeout = 6.0,
              metrics_port: Annotated[int | None, typer.Option(
                  help="Serve Prometheus metrics at /metrics on this port (host: $TRIBUNAL_WEB_HOST)")] = None) -> None:
    """Publish what ZooKeeper's watches report as scheduler and job events, plus periodic snapshots."""
    from streams.groups.bridge import Bridge, serve_metrics
    from streams.topics import create_topics
    from streams.zk.layout import Layout

    settings = settings_from(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    create_topics(settings)
    bridge = Bridge(settings, Layout(root), snapshot_interval, drop_watch_events, session_timeout)
    if metrics_port is not None:
        serve_metrics(settings.web_host, metrics_port)

    serve_until_stopped(bridge.run, bridge.stop)


@groups_cli.command("scheduler")
def scheduler(group: Annotated[str, typer.Option(help="Scheduler group")],
              scheduler_id: Annotated[str, typer.Option("--id", help="This scheduler's id")],
              address: Annotated[str, typer.Option(help="Where this scheduler listens")] = "",
              fault_tolerance: Annotated[int, typer.Option(min=1, help="n: failures it tolerates")] = 1,
              alarm_threshold: Annotated[int, typer.Option(min=0, help="M: alert above this many jobs")] = 10,
              run_log: Annotated[Path | None, typer.Option(help="Append a JSON line per job start/stop")] = None,
              bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
              root: Root = "/tribunal", session_timeout: SessionTimeout = 6.0,
              drain_interval: Annotated[float, typer.Option(help="Seconds a job takes to finish its run "
                                                            "once its scheduler is offline")] = 0.5) -> None:
    """Run a demonstration scheduler: it takes the jobs offered to it and logs what it runs."""
    from streams.groups.scheduler import SchedulerClient
    from streams.zk.layout import Layout

    settings = settings_from(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    sink = open_file(run_log, "a") if run_log else None

    def note(event: str) -> Any:
        def write(job: str) -> None:
            typer.echo(f"{scheduler_id}: {event} {job}", err=True)
            if sink is not None:
                sink.write(json.dumps({"t": time.time(), "event": event, "job": job, "scheduler": scheduler_id}) + "\n")
                sink.flush()
        return write

    client = SchedulerClient(settings, group, scheduler_id, address, fault_tolerance, alarm_threshold, Layout(root),
                             session_timeout, drain_interval, on_start=note("start"), on_stop=note("stop"))
    serve(client.run)


@groups_cli.command("rebalance")
def rebalance_group(group: Annotated[str, typer.Option(help="Scheduler group")], zookeeper: ZkHosts = None,
                    root: Root = "/tribunal",
                    timeout: Annotated[float, typer.Option(help="Give up after this many seconds")] = 120.0) -> None:
    """Move jobs from the most to the least loaded schedulers through the offline list."""
    from kazoo.handlers.threading import KazooTimeoutError

    from streams.groups.rebalance import rebalance
    from streams.zk.client import client
    from streams.zk.layout import Layout

    settings = settings_from(zookeeper_hosts=zookeeper)
    zk = client(settings.zookeeper_hosts, settings=settings)
    try:
        zk.start(timeout=15)
    except KazooTimeoutError as e:
        raise TribunalError(f"no ZooKeeper answers at {settings.zookeeper_hosts}: {e}") from None
    try:
        moves = rebalance(zk, Layout(root), group, timeout, say=lambda line: typer.echo(line, err=True))
    finally:
        zk.stop()
        zk.close()
    for sid, before, after in moves:
        typer.echo(f"{sid}: {before} -> {after}")
    typer.echo(f"group {group} is balanced ({len(moves)} move(s))")
