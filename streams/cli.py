"""The `tribunal` command line: infrastructure, topics, the worker, and producing/following records.

Every failure tribunal anticipates is a `TribunalError`, printed as one line on stderr with exit
status 1; settings come from flags, then `TRIBUNAL_*` / `KAFKA_BOOTSTRAP` environment variables.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from streams.errors import ConfigError, TribunalError
from streams.settings import Settings

cli = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="tribunal: an event-sourced control plane for elastic scheduling.")
infra_cli = typer.Typer(no_args_is_help=True, help="Run a real Kafka + ZooKeeper on 127.0.0.1 (no Docker).")
topics_cli = typer.Typer(no_args_is_help=True, help="Create and list tribunal's topics.")
cli.add_typer(infra_cli, name="infra")
cli.add_typer(topics_cli, name="topics")

BOOTSTRAP_HELP = "Kafka bootstrap servers (default: $TRIBUNAL_KAFKA_BOOTSTRAP, $KAFKA_BOOTSTRAP, 127.0.0.1:9092)"
Bootstrap = Annotated[str | None, typer.Option("--bootstrap", "-b", help=BOOTSTRAP_HELP)]
Prefix = Annotated[str | None, typer.Option("--topic-prefix", help="Prefix of every topic name")]


def _settings(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


# -- infra ------------------------------------------------------------------------------------
Brokers = Annotated[int, typer.Option("--brokers", min=1, max=9, help="Brokers in the KRaft cluster")]
Home = Annotated[Path | None, typer.Option("--home", help="Data, logs and pid files (default .tribunal/)")]
KafkaPort = Annotated[int | None, typer.Option("--kafka-port", help="First broker's port")]
ControllerPort = Annotated[int | None, typer.Option("--controller-port", help="First controller's port")]
ZkPort = Annotated[int | None, typer.Option("--zk-port", help="ZooKeeper's client port")]


def _cluster(brokers: int, home: Path | None, kafka_port: int | None, controller_port: int | None,
             zk_port: int | None) -> Any:
    import dataclasses

    from streams.infra import Cluster, Topology

    topology = Topology.default(brokers, home.resolve() if home else None)
    changes = {k: v for k, v in {"kafka_port": kafka_port, "controller_port": controller_port,
                                  "zk_port": zk_port}.items() if v is not None}
    return Cluster(dataclasses.replace(topology, **changes))


@infra_cli.command("install")
def infra_install() -> None:
    """Resolve the Kafka and ZooKeeper jars from Maven Central into infra/lib (once)."""
    from streams.infra.install import install_jars, resolved_versions

    fetched = install_jars()
    versions = ", ".join(f"{k} {v}" for k, v in resolved_versions().items())
    typer.echo(("installed: " if fetched else "up to date: ") + versions)


@infra_cli.command("up")
def infra_up(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
             controller_port: ControllerPort = None, zk_port: ZkPort = None) -> None:
    """Start ZooKeeper and the broker(s); harmless when they already run."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port)
    timings = cluster.up()
    for name, seconds in timings.items():
        typer.echo(f"{name:<10} " + (f"started in {seconds:.1f}s" if seconds else "already running"))
    typer.echo(f"kafka:     {cluster.topology.bootstrap}")
    typer.echo(f"zookeeper: {cluster.topology.zookeeper_hosts}")
    typer.echo(f"logs:      {cluster.log_dir}")


@infra_cli.command("down")
def infra_down(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
               controller_port: ControllerPort = None, zk_port: ZkPort = None,
               purge: Annotated[bool, typer.Option(help="Also delete data and logs")] = False) -> None:
    """Stop the brokers, then ZooKeeper, and wait until their ports are free."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port)
    stopped = cluster.down()
    typer.echo("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    if purge:
        cluster.purge()
        typer.echo(f"purged:  {cluster.topology.home}")


@infra_cli.command("status")
def infra_status(brokers: Brokers = 1, home: Home = None, kafka_port: KafkaPort = None,
                 controller_port: ControllerPort = None, zk_port: ZkPort = None) -> None:
    """Show each server's pid, port and resident memory; exit 1 unless all are up."""
    cluster = _cluster(brokers, home, kafka_port, controller_port, zk_port)
    rows = cluster.status()
    for s in rows:
        rss = f"{s.rss_kb / 1024:.0f} MiB" if s.rss_kb else "-"
        state = "up" if s.alive and s.listening else ("starting" if s.alive else "down")
        typer.echo(f"{s.name:<10} {state:<9} pid={s.pid or '-':<8} port={s.port:<6} rss={rss}")
    if not all(s.alive and s.listening for s in rows):
        raise typer.Exit(1)


# -- topics -----------------------------------------------------------------------------------
@topics_cli.command("create")
def topics_create(bootstrap: Bootstrap = None, topic_prefix: Prefix = None,
                  partitions: Annotated[int | None, typer.Option(min=1)] = None) -> None:
    """Create every missing tribunal topic with its partitions and cleanup policy."""
    from streams.topics import create_topics

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix, partitions=partitions)
    made = create_topics(settings)
    typer.echo("created: " + (", ".join(made) if made else "nothing (all exist)"))


@topics_cli.command("list")
def topics_list(topic_prefix: Prefix = None) -> None:
    """Print the topics tribunal uses, with their cleanup policy."""
    from streams.topics import catalogue

    for spec in catalogue(_settings(topic_prefix=topic_prefix)):
        typer.echo(f"{spec.name:<32} {spec.config()['cleanup.policy']}")


# -- worker -----------------------------------------------------------------------------------
@cli.command("worker")
def worker(bootstrap: Bootstrap = None, topic_prefix: Prefix = None,
           app_id: Annotated[str | None, typer.Option(help="Faust app id (consumer group)")] = None,
           web_port: Annotated[int | None, typer.Option(help="Port of the worker's web endpoint")] = None,
           data_dir: Annotated[Path | None, typer.Option(help="Where table state is kept")] = None,
           partitions: Annotated[int | None, typer.Option(min=1)] = None,
           log_level: Annotated[str | None, typer.Option()] = None) -> None:
    """Run the Faust worker in the foreground (creates missing topics first)."""
    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix, app_id=app_id,
                         web_port=web_port, data_dir=data_dir, partitions=partitions, log_level=log_level)
    _run_worker(settings)


def _fewer_collections() -> None:
    """The folds allocate many short-lived objects and keep a few large persistent maps: at CPython's
    default young-generation threshold (700) the collector runs so often it took 60% of a group's fold
    (bench/limits_fold.py) and a tenth of a replay (bench/replay_file.py)."""
    gc.set_threshold(10_000, 10, 10)


def _run_worker(settings: Settings) -> None:
    import faust

    from streams.topics import create_topics
    from streams.worker.app import create_app, discard_local_tables

    create_topics(settings)
    _fewer_collections()
    app = create_app(settings)
    if settings.processing_guarantee == "exactly_once":
        discard_local_tables(app)
    # What start-up built (modules, Faust's services, the app) lives as long as the process: a full
    # collection scanned all of it (40-50 ms, measured before the worker started), a stall of every
    # record in flight. Frozen, the collector scans only what was made after.
    gc.freeze()
    worker = faust.Worker(app, loglevel=settings.log_level, logfile=None)
    # Faust's progress spinner sets the root logger to DEBUG (to spin on every record logged), so
    # every aiokafka debug call built a log record: 7% of the worker's time, measured.
    worker.spinner = None
    worker.execute_from_commandline()


@cli.command("run")
def run() -> None:
    """Start the local Kafka + ZooKeeper (if needed) and the worker: the embedded default."""
    from streams.infra import Cluster, Topology

    cluster = Cluster(Topology.default())
    cluster.up()
    settings = Settings()
    typer.echo(f"kafka {cluster.topology.bootstrap} and zookeeper {cluster.topology.zookeeper_hosts} are up.\n"
               "In another shell, give pool-a a policy, send a metric, and watch the decision:\n"
               "  .venv/bin/tribunal policy apply examples/decider-pool-a.yaml --pool pool-a\n"
               "  .venv/bin/tribunal metric ats 75 --pool pool-a\n"
               "  .venv/bin/tribunal tail scaling-decisions --from-beginning\n"
               "Stop with Ctrl-C, then `make down`.", err=True)
    _run_worker(settings)


# -- scheduler groups: the ZooKeeper bridge, a scheduler, manual balancing ------------------------
ZkHosts = Annotated[str | None, typer.Option("--zookeeper", "-z", help="ZooKeeper hosts (default "
                                             "$TRIBUNAL_ZOOKEEPER_HOSTS, $ZOOKEEPER_HOSTS, 127.0.0.1:2181)")]
Root = Annotated[str, typer.Option("--root", help="ZooKeeper root of the scheduler groups")]
SessionTimeout = Annotated[float, typer.Option("--session-timeout", help="ZooKeeper session timeout, seconds")]


def _serve(make: Any) -> None:
    """Run an asyncio service until SIGTERM or Ctrl-C."""
    import asyncio
    import logging
    import signal

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s")
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await make(stop)

    asyncio.run(main())


@cli.command("zk-bridge")
def zk_bridge(bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
              root: Root = "/tribunal",
              snapshot_interval: Annotated[float, typer.Option(help="Seconds between full snapshots")] = 30.0,
              drop_watch_events: Annotated[float, typer.Option(
                  min=0.0, max=1.0, help="Share of watch events to drop, for tests (never snapshots)")] = 0.0,
              session_timeout: SessionTimeout = 6.0) -> None:
    """Publish what ZooKeeper's watches report as scheduler and job events, plus periodic snapshots."""
    import asyncio

    from streams.topics import create_topics
    from streams.zk.bridge import Bridge
    from streams.zk.layout import Layout

    settings = _settings(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    create_topics(settings)
    bridge = Bridge(settings, Layout(root), snapshot_interval, drop_watch_events, session_timeout)

    async def serve(stop: asyncio.Event) -> None:
        task = asyncio.create_task(bridge.run())
        await stop.wait()
        bridge.stop()
        await task

    _serve(serve)


@cli.command("scheduler")
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

    from streams.scheduler import SchedulerClient
    from streams.zk.layout import Layout

    settings = _settings(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    sink = _open(run_log, "a") if run_log else None

    def note(event: str) -> Any:
        def write(job: str) -> None:
            typer.echo(f"{scheduler_id}: {event} {job}", err=True)
            if sink is not None:
                sink.write(json.dumps({"t": time.time(), "event": event, "job": job, "scheduler": scheduler_id}) + "\n")
                sink.flush()
        return write

    client = SchedulerClient(settings, group, scheduler_id, address, fault_tolerance, alarm_threshold, Layout(root),
                             session_timeout, drain_interval, on_start=note("start"), on_stop=note("stop"))
    _serve(client.run)


@cli.command("rebalance")
def rebalance_group(group: Annotated[str, typer.Option(help="Scheduler group")], zookeeper: ZkHosts = None,
                    root: Root = "/tribunal",
                    timeout: Annotated[float, typer.Option(help="Give up after this many seconds")] = 120.0) -> None:
    """Move jobs from the most to the least loaded schedulers through the offline list."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from streams.zk.layout import Layout
    from streams.zk.rebalance import rebalance

    settings = _settings(zookeeper_hosts=zookeeper)
    zk = KazooClient(hosts=settings.zookeeper_hosts)
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


# -- producing and following ------------------------------------------------------------------
@cli.command("metric")
def metric(app: Annotated[str, typer.Argument(help="App name, e.g. ats")],
           value: Annotated[float, typer.Argument(help="Load score in [0, 100]")],
           pool: Annotated[str, typer.Option(help="Pool id (the record key)")] = "default",
           channel: Annotated[str, typer.Option(help="plugin_decider or plugin_justice")] = "plugin_decider",
           bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Publish one `app-metrical` command in the seed's envelope."""
    from streams.io import envelope, produce

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    topic = settings.topic(channel)
    meta = produce(settings, topic, pool.encode(), envelope(app, value, channel))
    typer.echo(f"sent to {topic}[{meta[0]}]@{meta[1]}: {app}={value:g} (pool {pool})")


@cli.command("tail")
def tail(topic: Annotated[str, typer.Argument(help="Topic name, without the prefix")],
         as_json: Annotated[bool, typer.Option("--json", help="JSON lines (the replay file format)")] = False,
         from_beginning: Annotated[bool, typer.Option("--from-beginning")] = False,
         max_records: Annotated[int | None, typer.Option("--max", help="Stop after this many")] = None,
         idle_timeout: Annotated[float | None, typer.Option(help="Stop after this many quiet seconds")] = None,
         bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Follow a topic (read_committed) and print its records as a table or JSON lines."""
    from streams.io import follow

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    name = settings.topic(topic)
    if not as_json:
        typer.echo(f"{'partition':>9} {'offset':>8}  {'time':<19}  {'key':<12} value")
    for row in follow(settings, name, from_beginning, max_records, idle_timeout):
        if as_json:
            typer.echo(json.dumps(row, sort_keys=True, separators=(",", ":")))
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["timestamp"] / 1000))
            value = row["value"] if isinstance(row["value"], str) else json.dumps(row["value"], sort_keys=True)
            typer.echo(f"{row['partition']:>9} {row['offset']:>8}  {stamp:<19}  {row['key'] or '-':<12} {value}")
        sys.stdout.flush()


# -- policies and replay ----------------------------------------------------------------------
policy_cli = typer.Typer(no_args_is_help=True, help="Validate policy documents (YAML or JSON).")
cli.add_typer(policy_cli, name="policy")


@policy_cli.command("validate")
def policy_validate(file: Annotated[Path, typer.Argument(help="Policy file: a record, or a seed document")],
                    version: Annotated[str | None, typer.Option(help="Version for a bare seed document")] = None,
                    capacity: Annotated[int | None, typer.Option(help="Pool capacity to check")] = None) -> None:
    """Print every error at once, or a one-line summary of a valid policy."""
    from streams.policy_files import summary

    typer.echo(summary(_load_policy(file, version, capacity)))


def _load_policy(file: Path, version: str | None, capacity: int | None) -> Any:
    """The validated policy in `file`, or every problem on stderr and exit status 1."""
    from streams.policy_files import PolicyInvalid, load

    try:
        return load(file, version, capacity)
    except PolicyInvalid as e:
        for problem in e.problems:
            typer.echo(f"{file}: {problem}", err=True)
        raise typer.Exit(1) from None


@policy_cli.command("apply")
def policy_apply(file: Annotated[Path, typer.Argument(help="Policy file: a record, or a seed document")],
                 pool: Annotated[str, typer.Option(help="Pool id (the record key)")],
                 version: Annotated[str | None, typer.Option(help="Version for a bare seed document")] = None,
                 capacity: Annotated[int | None, typer.Option(help="Pool capacity")] = None,
                 bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Validate a policy, then publish it to `policies` for one pool (it applies to later records)."""
    from streams.io import produce

    policy = _load_policy(file, version, capacity)
    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    topic = settings.topic("policies")
    partition, offset = produce(settings, topic, pool.encode(), policy.model_dump_json().encode())
    typer.echo(f"applied {policy.kind} policy {policy.version} to pool {pool}: {topic}[{partition}]@{offset}")


@cli.command("state")
def state(pool: Annotated[str | None, typer.Option(help="Pool id")] = None,
          group: Annotated[str | None, typer.Option(help="Scheduler group id")] = None,
          fold: Annotated[str | None, typer.Option(help="Or any fold of the catalogue by name (with --key)")] = None,
          key: Annotated[str | None, typer.Option(help="The key, with --fold")] = None,
          as_json: Annotated[bool, typer.Option("--json", help="Print the raw JSON")] = False,
          web: Annotated[str | None, typer.Option(help="Worker web endpoint host:port "
                                                  "(default $TRIBUNAL_WEB_HOST:$TRIBUNAL_WEB_PORT)")] = None) -> None:
    """Show a pool (instances, metricals, free capacity, policy), a scheduler group, or a key of any fold."""
    import urllib.error
    import urllib.parse
    import urllib.request

    named = [(s, k) for s, k in (("pools", pool), ("groups", group), (fold, key)) if s is not None and k is not None]
    if len(named) != 1 or (fold is None) != (key is None):
        raise TribunalError("name exactly one of --pool, --group, or --fold with --key")
    [(scope, key)] = named
    settings = _settings()
    where = web or f"{settings.web_host}:{settings.web_port}"
    url = f"http://{where}/{scope}/{urllib.parse.quote(key, safe='')}/"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise TribunalError(f"{scope} {key!r}: the worker at {where} answered {e.code}") from None
    except (urllib.error.URLError, OSError) as e:
        raise TribunalError(f"no worker answers at {where}: {getattr(e, 'reason', e)}") from None
    if as_json or pool is None:
        typer.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    typer.echo(f"pool {pool}")
    if "decider" in body:
        d = body["decider"]
        typer.echo(f"  decider policy {d['policy_version']}: capacity {d['capacity']}, free {d['free']}")
        typer.echo(f"  {'app':<16} {'P':>2} {'min':>4} {'max':>4} {'instances':>9} {'metrical':>8}")
        for a in d["apps"]:
            top = a["max"] if a["max"] is not None else "-"
            typer.echo(f"  {a['app']:<16} {a['priority']:>2} {a['min']:>4} {top:>4} "
                       f"{a['instances']:>9} {a['metrical']:>8g}{'  idle' if a['idle'] else ''}")
    if "justice" in body:
        j = body["justice"]
        targets = ", ".join(f"{k} {v}" for k, v in j["targets"].items()) or "none yet"
        typer.echo(f"  justice policy {j['policy_version']}: driver {j['driver']}; targets {targets}")
    typer.echo("  last offsets: " + ", ".join(f"{k}@{v}" for k, v in sorted(body["offsets"].items())))


FromBound = Annotated[str | None, typer.Option("--from", help="First record: an offset (every partition) or a "
                                                 "time, e.g. 2026-11-22T14:02:00Z")]
ToBound = Annotated[str | None, typer.Option("--to", help="Stop before this offset or time")]


dlq_cli = typer.Typer(no_args_is_help=True, help="Dead letters: produce them again once their cause is fixed.")
cli.add_typer(dlq_cli, name="dlq")


@dlq_cli.command("redrive")
def dlq_redrive(topic: Annotated[str, typer.Option(help="Dead-letter topic, without the prefix, e.g. "
                                                   "plugin_decider.dlq")],
                reason: Annotated[str | None, typer.Option(help="Only dead letters with this reason_code")] = None,
                start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
                topic_prefix: Prefix = None) -> None:
    """Produce dead letters' original key and bytes again to their topic, each exactly once.

    `--from`/`--to` pick dead letters by their offset on the dead-letter topic or their time. A
    dead letter redriven before (by any earlier run) is skipped, so running this twice decides
    nothing twice.
    """
    import asyncio

    from streams.audit.kafka_log import Bound
    from streams.audit.progress import LazyProgress
    from streams.dlq import redrive

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    with LazyProgress("redriving") as bar:
        summary = asyncio.run(redrive(settings, settings.topic(topic), reason, Bound.parse(start), Bound.parse(end),
                                      bar.advance))
    typer.echo(f"{'reason':<20} {'redriven':>8} {'before':>8} {'filtered':>8}")
    for code, redriven, already, filtered in summary.rows():
        typer.echo(f"{code:<20} {redriven:>8} {already:>8} {filtered:>8}")
    if summary.unreadable:
        typer.echo(f"{summary.unreadable} record(s) on the topic are not dead letters; left alone")
    typer.echo(f"redriven {sum(summary.redriven.values())}, redriven before {sum(summary.already.values())}, "
               f"left by the filters {sum(summary.filtered.values())}")


@cli.command("export")
def export(topics: Annotated[str, typer.Option(help="Comma-separated topics, without the prefix")],
           output_file: Annotated[Path, typer.Option("--output", "-o", help="Replay file, JSON lines ('-': stdout)")],
           start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
           topic_prefix: Prefix = None) -> None:
    """Write topics' committed records as a replay file, in the order the worker applied them.

    Records no output names yet (the worker has not reached them) follow in log order: merged by
    timestamp, never reordering a partition.
    """
    from streams.audit.kafka_log import Bound, KafkaLog, within
    from streams.audit.progress import LazyProgress
    from streams.replay import export_row

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    names = [settings.topic(t.strip()) for t in topics.split(",") if t.strip()]
    keep = within(Bound.parse(start), Bound.parse(end))
    with LazyProgress("reading") as bar:
        log = KafkaLog.read(settings, bar.advance, topics=names)
    sink = sys.stdout.buffer if str(output_file) == "-" else _open(output_file, "wb")
    written = 0
    try:
        for r in log.ordered():
            if keep(r):
                sink.write(orjson_line(export_row(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)))
                written += 1
    finally:
        if sink is not sys.stdout.buffer:
            sink.close()
    typer.echo(f"exported {written} records of {', '.join(names)}", err=True)


def orjson_line(row: dict[str, Any]) -> bytes:
    import orjson

    return orjson.dumps(row) + b"\n"


@cli.command("replay")
def replay(input_file: Annotated[Path | None, typer.Option("--input", "-i", help="Exported log, JSON lines "
                                                            "('-': stdin)")] = None,
           output_file: Annotated[Path | None, typer.Option("--output", "-o", help="Decisions, JSON lines "
                                                             "('-': stdout)")] = None,
           from_kafka: Annotated[bool, typer.Option("--from-kafka", help="Read the input topics from the broker "
                                                    "(in the order the worker applied them)")] = False,
           verify: Annotated[bool, typer.Option("--verify", help="Compare every derived output with the recorded "
                                                "output topics; exit 1 at the first divergence")] = False,
           start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
           topic_prefix: Prefix = None,
           jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, help="Processes folding the records "
                                             "(keys are independent; 0: one per core)")] = 0) -> None:
    """Run the pure cores over an exported log, or over the topics themselves, and write or verify the outputs."""
    from streams.replay import LineWriter, Replayer, replay_lines

    if (input_file is None) == (not from_kafka):
        raise TribunalError("give exactly one of --input FILE and --from-kafka")
    if verify and not from_kafka:
        raise TribunalError("--verify compares with the recorded topics: use it with --from-kafka")
    if output_file is None and not verify:
        raise TribunalError("give --output FILE (or --verify)")
    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    replayer = Replayer(topic_prefix=settings.topic_prefix)
    processes = jobs or os.cpu_count() or 1
    _fewer_collections()
    gc.freeze()  # start-up's objects: never scanned again, here nor in the processes forked from here
    started = time.perf_counter()
    sink = None
    if output_file is not None:
        sink = sys.stdout.buffer if str(output_file) == "-" else _open(output_file, "wb")
    try:
        if from_kafka:
            _replay_kafka(settings, replayer, sink, verify, start, end, processes)
        else:
            assert input_file is not None and sink is not None
            source = sys.stdin.buffer if str(input_file) == "-" else _open(input_file, "rb")
            try:
                with LineWriter(sink) as writer:
                    for line in replay_lines(source, replayer, processes):
                        writer.write(line)
            finally:
                if source is not sys.stdin.buffer:
                    source.close()
    finally:
        if sink is not None and sink is not sys.stdout.buffer:
            sink.close()
    elapsed = time.perf_counter() - started
    counts = replayer.counts
    typer.echo(f"replayed {counts.get('records', 0)} records ({counts.get('skipped', 0)} skipped) in {elapsed:.2f}s: "
               + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("records", "skipped")), err=True)


def _replay_kafka(settings: Settings, replayer: Any, sink: Any, verify: bool, start: str | None,
                  end: str | None, jobs: int) -> None:
    from streams.audit.kafka_log import Bound, KafkaLog, replay_log, within
    from streams.audit.progress import LazyProgress
    from streams.replay import LineWriter, output_line

    in_range = within(Bound.parse(start), Bound.parse(end))
    writer = LineWriter(sink) if sink is not None else None
    try:
        with LazyProgress("reading the log") as bar:
            log = KafkaLog.read(settings, bar.advance)
            bar.phase("ordering", len(log.inputs))
            ordered = log.ordered()
            bar.phase("replaying", len(ordered))
            result = replay_log(ordered, replayer, in_range, log.recorded if verify else None, bar.advance,
                                (lambda out: writer.write(output_line(out))) if writer is not None else None, jobs)
    finally:
        if writer is not None:
            writer.close()
    if result.divergence is not None:
        typer.echo(result.divergence.describe())
        typer.echo(f"{result.agreed} output records agreed before it", err=True)
        raise typer.Exit(1)
    if verify:
        typer.echo(f"verified: {result.agreed} output records of {result.compared_inputs} input records agree "
                   f"with the recorded topics")


@cli.command("explain")
def explain_command(pool: Annotated[str | None, typer.Option(help="Pool id (with --seq)")] = None,
                    group: Annotated[str | None, typer.Option(help="Scheduler group (with --seq)")] = None,
                    seq: Annotated[int | None, typer.Option(help="The decision's seq (scaling-decisions for a "
                                                            "pool, group-health for a group)")] = None,
                    stream: Annotated[str | None, typer.Option(help="Output topic the seq counts on (default "
                                                               "scaling-decisions / group-health)")] = None,
                    cause: Annotated[str | None, typer.Option(
                        help="Or the input itself: TOPIC:PARTITION:OFFSET")] = None,
                    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable")] = False,
                    bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Why a decision was made: input, policy and ranges, state before, rounds and scores, state after, reason."""
    from streams.audit.explain import cause_of_seq, explain, parse_cause, render
    from streams.audit.kafka_log import KafkaLog
    from streams.audit.progress import LazyProgress

    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    if cause is None and (seq is None or (pool is None) == (group is None)):
        raise TribunalError("give --cause TOPIC:PARTITION:OFFSET, or --seq N with one of --pool and --group")
    with LazyProgress("reading the log") as bar:
        log = KafkaLog.read(settings, bar.advance)
    if cause is not None:
        target = parse_cause(cause)
        if not target[0].startswith(settings.topic_prefix):  # given without the deployment's prefix
            target = (settings.topic(target[0]), target[1], target[2])
    else:
        assert seq is not None
        key = pool if pool is not None else group
        assert key is not None
        target = cause_of_seq(log, settings, stream or ("scaling-decisions" if pool else "group-health"), key, seq)
    found = explain(log, settings, target)
    typer.echo(json.dumps(found, indent=2) if as_json else render(found))


@cli.command("report")
def report(output_file: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write")],
           pool: Annotated[str | None, typer.Option(help="Pool id")] = None,
           group: Annotated[str | None, typer.Option(help="Scheduler group")] = None,
           start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
           topic_prefix: Prefix = None) -> None:
    """A self-contained HTML audit page: plots over time and every decision with its explanation."""
    from streams.audit.explain import explanations, wanted_for
    from streams.audit.kafka_log import Bound, KafkaLog, within
    from streams.audit.progress import LazyProgress
    from streams.audit.report import render_page

    if (pool is None) == (group is None):
        raise TribunalError("name exactly one of --pool and --group")
    settings = _settings(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    kind, key = ("pool", pool) if pool is not None else ("group", group)
    assert key is not None
    of_key = wanted_for(settings, "pools" if pool is not None else "groups", key)
    in_range = within(Bound.parse(start), Bound.parse(end))
    with LazyProgress("reading the log") as bar:
        log = KafkaLog.read(settings, bar.advance)
    found = list(explanations(log, settings, lambda r: of_key(r) and in_range(r)))
    span = f"from {start or 'the beginning'} to {end or 'the end'}"
    try:
        output_file.write_text(render_page(kind, key, found, span))
    except OSError as e:
        raise TribunalError(f"cannot write {output_file}: {e.strerror}") from None
    typer.echo(f"wrote {output_file}: {kind} {key}, {len(found)} input records")


def _open(path: Path, mode: str) -> Any:
    try:
        return path.open(mode)
    except OSError as e:
        raise TribunalError(f"cannot open {path}: {e.strerror}") from None


def register_folds(entries: str) -> None:
    """Add the folds `TRIBUNAL_FOLDS` names ('module:NAME', comma-separated) to the catalogue."""
    import importlib

    from streams.core import folds

    for entry in filter(None, (e.strip() for e in entries.split(","))):
        module, _, name = entry.partition(":")
        try:
            fold = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"TRIBUNAL_FOLDS entry {entry!r}: {e}") from None
        if not isinstance(fold, folds.Fold):
            raise ConfigError(f"TRIBUNAL_FOLDS entry {entry!r} is a {type(fold).__name__}, not a Fold")
        if fold.name not in folds.BY_NAME:
            folds.register(fold)


def main() -> None:
    try:
        register_folds(Settings().folds)
        cli()
    except TribunalError as e:
        typer.echo(f"tribunal: {e}", err=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except (TimeoutError, OSError) as e:
        typer.echo(f"tribunal: {type(e).__name__}: {e}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
