"""Producing and reading records: `metric`, `tail`, `policy validate|apply`, and `state` from the worker."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from streams.cli.base import (
    Bootstrap,
    Prefix,
    Web,
    dispatch_cli,
    fold_named,
    groups_cli,
    load_policy,
    one_key,
    policy_cli,
    pools_cli,
    settings_from,
    shards_cli,
    topics_cli,
)
from streams.cli.renamed import say
from streams.errors import TribunalError


def _print_namespace(body: dict[str, Any]) -> None:
    typer.echo(f"namespace {body['namespace']}: now {body['now']}, running {body['running']} of {body['max']}, "
               f"pending {body['pending']}")
    typer.echo(f"  {'worker':<20} {'running':>7} {'max':>5} {'pending':>8}")
    for name, w in body["workers"].items():
        typer.echo(f"  {name:<20} {w['running']:>7} {w['max'] if w['max'] is not None else '-':>5} {w['pending']:>8}")
    shown = body["jobs"][:20]
    if shown:
        typer.echo(f"  {'job':<36}  {'worker':<12} {'status':<8} {'attempt':>7} {'acceptable start':>16}")
    for j in shown:
        typer.echo(f"  {j['uuid']:<36}  {j['worker']:<12} {'running' if j['running'] else 'pending':<8} "
                   f"{j['attempt']:>7} {j['acceptable_start']:>16}")
    if body["pending"] + body["running"] > len(shown):
        typer.echo(f"  ... {body['pending'] + body['running'] - len(shown)} more (--json lists up to "
                   f"{body['jobs_shown']})")


def _print_job_set(body: dict[str, Any]) -> None:
    state = "released" if body["released"] else f"awaiting {', '.join(body['awaiting'])}"
    typer.echo(f"job set {body['job_set']}: epoch {body['epoch']} ({body['change'] or 'none yet'}), {state}; "
               f"{body['tasks']} tasks, strategy {body['strategy']}")
    for node, spans in body["ranges"].items():
        owned = ", ".join(f"{a}-{b}" for a, b in spans) or "nothing"
        typer.echo(f"  {node:<16} {body['nodes'].get(node, ''):<24} {owned}")


# -- producing and following ------------------------------------------------------------------
@pools_cli.command("metric")
def metric(app: Annotated[str, typer.Argument(help="App name, e.g. ats")],
           value: Annotated[float, typer.Argument(help="Load score in [0, 100]")],
           pool: Annotated[str, typer.Option(help="Pool id (the record key)")] = "default",
           channel: Annotated[str, typer.Option(help="plugin_decider or plugin_justice")] = "plugin_decider",
           bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Publish one `app-metrical` command in the seed's envelope."""
    from streams.clients import envelope, produce

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    topic = settings.topic(channel)
    meta = produce(settings, topic, pool.encode(), envelope(app, value, channel))
    typer.echo(f"sent to {topic}[{meta[0]}]@{meta[1]}: {app}={value:g} (pool {pool})")


@topics_cli.command("tail")
def tail(topic: Annotated[str, typer.Argument(help="Topic name, without the prefix")],
         as_json: Annotated[bool, typer.Option("--json", help="JSON lines (the replay file format)")] = False,
         from_beginning: Annotated[bool, typer.Option("--from-beginning")] = False,
         max_records: Annotated[int | None, typer.Option("--max", help="Stop after this many")] = None,
         idle_timeout: Annotated[float | None, typer.Option(help="Stop after this many quiet seconds")] = None,
         bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Follow a topic (read_committed) and print its records as a table or JSON lines."""
    from streams.clients import follow

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
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


# -- policies and state -----------------------------------------------------------------------
@policy_cli.command("validate")
def policy_validate(file: Annotated[Path, typer.Argument(help="Policy file: a record, or a seed document")],
                    version: Annotated[str | None, typer.Option(help="Version for a bare seed document")] = None,
                    capacity: Annotated[int | None, typer.Option(help="Pool capacity to check")] = None) -> None:
    """Print every error at once, or a one-line summary of a valid policy (and, on stderr, advice for a large
    pool)."""
    from schemas.policy import DeciderPolicy
    from streams.policy_files import summary
    from streams.pool_sizes import advice

    policy = load_policy(file, version, capacity)
    typer.echo(summary(policy))
    if isinstance(policy, DeciderPolicy) and (told := advice(policy)) is not None:
        typer.echo(f"tribunal: advice: {told}", err=True)


@policy_cli.command("apply")
def policy_apply(file: Annotated[Path, typer.Argument(help="Policy file: a record, or a seed document")],
                 pool: Annotated[str, typer.Option(help="Pool id (the record key)")],
                 version: Annotated[str | None, typer.Option(help="Version for a bare seed document")] = None,
                 capacity: Annotated[int | None, typer.Option(help="Pool capacity")] = None,
                 bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Validate a policy, then publish it to `policies` for one pool (it applies to later records)."""
    import orjson

    from schemas.policy import published
    from streams.clients import produce

    policy = load_policy(file, version, capacity)
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    topic = settings.topic("policies")
    partition, offset = produce(settings, topic, pool.encode(), orjson.dumps(published(policy)))
    typer.echo(f"applied {policy.kind} policy {policy.version} to pool {pool}: {topic}[{partition}]@{offset}")


Json = Annotated[bool, typer.Option("--json", help="Print the raw JSON")]


@pools_cli.command("state")
def state(ctx: typer.Context, pool: Annotated[str | None, typer.Option(help="Pool id")] = None,
          group: Annotated[str | None, typer.Option(hidden=True, help="`tribunal groups state` now")] = None,
          namespace: Annotated[str | None, typer.Option(hidden=True, help="`tribunal dispatch state` now")] = None,
          job_set: Annotated[str | None, typer.Option("--job-set", hidden=True, help="`tribunal shards state` now")]
          = None,
          fold: Annotated[str | None, typer.Option(help="Or any fold of the catalogue by name (with --key)")] = None,
          key: Annotated[str | None, typer.Option(help="The key, with --fold")] = None,
          as_json: Json = False,
          web: Web = None) -> None:
    """Show a pool: instances, metricals, free capacity, policy (or a key of any fold, with --fold and --key)."""
    for flag, value, noun in (("--group", group, "groups"), ("--namespace", namespace, "dispatch"),
                              ("--job-set", job_set, "shards")):
        if value is not None:  # the other keys of the old flat state command
            say(ctx, f"tribunal state {flag}", f"tribunal {noun} state {flag}")
    show_state(pool, group, namespace, job_set, fold, key, as_json, web)


@groups_cli.command("state")
def group_state(group: Annotated[str, typer.Option(help="Scheduler group id")], as_json: Json = False,
                web: Web = None) -> None:
    """Show a scheduler group: K, S, each scheduler's figures, orphans, offers."""
    show_state(None, group, None, None, None, None, as_json, web)


@dispatch_cli.command("state")
def namespace_state(namespace: Annotated[str, typer.Option("--namespace", "-n", help="Dispatcher namespace")],
                    as_json: Json = False, web: Web = None) -> None:
    """Show a dispatcher namespace: caps, counts, workers, jobs."""
    show_state(None, None, namespace, None, None, None, as_json, web)


@shards_cli.command("state")
def job_set_state(job_set: Annotated[str, typer.Option("--job-set", "-j", help="Shard job set")],
                  as_json: Json = False, web: Web = None) -> None:
    """Show a job set: its epoch, who awaits, who owns which tasks."""
    show_state(None, None, None, job_set, None, None, as_json, web)


def show_state(pool: str | None, group: str | None, namespace: str | None, job_set: str | None, fold: str | None,
               key: str | None, as_json: bool, web: str | None) -> None:
    from streams.clients import worker_page

    named = one_key(pool=pool, group=group, namespace=namespace, job_set=job_set,
                    fold=key if fold is not None else None)
    if named is None or (fold is None) != (key is None):
        raise TribunalError("name --pool, or --fold with --key")
    kind, key = named
    body = worker_page(web or settings_from().web, fold_named(kind) or fold or "", key)
    if namespace is not None and not as_json:
        _print_namespace(body)
        return
    if job_set is not None and not as_json:
        _print_job_set(body)
        return
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
