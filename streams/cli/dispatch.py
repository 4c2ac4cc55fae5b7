"""The dispatcher: `tribunal dispatch ticker`, `executor`, `jobs ...`, `api`; its `state` is in streams.cli.records."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from schemas.dispatch import MAX_JOBS_PER_ASSIGN
from streams.cli.base import (
    Bootstrap,
    Insecure,
    ListenHost,
    Prefix,
    Root,
    SessionTimeout,
    TlsCert,
    TlsClientCa,
    TlsKey,
    Web,
    ZkHosts,
    dispatch_cli,
    group,
    open_file,
    secured,
    serve_until_stopped,
    settings_from,
)
from streams.errors import TribunalError

jobs_cli = group("Dispatcher jobs: assign, finish, fail, cancel, show; caps.")
dispatch_cli.add_typer(jobs_cli, name="jobs")
Namespace = Annotated[str, typer.Option("--namespace", "-n", help="Dispatcher namespace (the record key)")]


@dispatch_cli.command("ticker")
def ticker(interval_ms: Annotated[int, typer.Option(min=1, help="Milliseconds between ticks")] = 100,
           namespace: Annotated[list[str] | None, typer.Option(
               "--namespace", "-n", help="Tick this namespace even while it has no work (repeatable)")] = None,
           pool: Annotated[list[str] | None, typer.Option(
               "--pool", "-p", help="Tick this decider pool on cluster-events (stale reports; repeatable)")] = None,
           pool_interval_ms: Annotated[int, typer.Option(min=1, help="Milliseconds between pool ticks")] = 1000,
           bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
           root: Root = "/tribunal", session_timeout: SessionTimeout = 6.0) -> None:
    """Write the clock: a Tick per dispatcher namespace with work, every interval, and per `--pool` every pool
    interval; one ticker ticks at a time."""
    from streams.ticker import Ticker
    from streams.topics import create_topics
    from streams.zk.layout import Layout

    settings = settings_from(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    create_topics(settings)
    service = Ticker(settings, interval_ms / 1000, Layout(root), session_timeout, frozenset(namespace or ()),
                     frozenset(pool or ()), pool_interval_ms / 1000)
    serve_until_stopped(service.run, service.stop)


@dispatch_cli.command("executor")
def executor(worker: Annotated[str, typer.Option(help="The worker (tenant) whose jobs this process runs")],
             namespace: Namespace = "default",
             seconds: Annotated[float, typer.Option(min=0, help="How long each job runs")] = 1.0,
             fail_every: Annotated[int, typer.Option(min=0, help="Report every k-th attempt failed (0: none)")] = 0,
             run_log: Annotated[Path | None, typer.Option(help="Append a JSON line per job start and end")] = None,
             command: Annotated[str | None, typer.Option(help=(
                 "What a job runs, as a process bound to this executor ({namespace} {uuid} {attempt} {external_id} "
                 "{info}): exit 0 finishes it, anything else fails it, its deadline stops it. Without it, a job "
                 "sleeps --seconds"))] = None,
             state_dir: Annotated[Path, typer.Option(help="--command: the jobs' logs")] = Path(".tribunal-executor"),
             term_grace: Annotated[float, typer.Option(min=0, help=(
                 "--command: seconds from SIGTERM to SIGKILL for a job stopped at its deadline"))] = 10.0,
             api: Annotated[str | None, typer.Option(help=(
                 "The dispatcher API's URL: starts and reports go through it with --token-file, and no Kafka "
                 "credentials are used"))] = None,
             token_file: Annotated[Path | None, typer.Option(help="--api: a file holding the tenant's token")] = None,
             api_cafile: Annotated[Path | None, typer.Option(help="--api: CA certificates (PEM) of an HTTPS "
                                                             "API")] = None,
             bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """A tenant: runs each job it is started with (a process of --command, or a sleep), then finishes it (or fails
    it)."""
    from streams.dispatcher.executor import Executor
    from streams.errors import ConfigError

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    connect = None
    if api is not None:
        from streams.dispatcher.http_client import HttpDispatcherClient, client_tls

        if token_file is None:
            raise ConfigError("--api needs --token-file")
        token = _secret(token_file)
        tls = client_tls(api_cafile) if api.startswith("https:") else None

        def connect(cursor: Path) -> HttpDispatcherClient:
            return HttpDispatcherClient(api, token, namespace, worker, tls, cursor)
    log = open_file(run_log, "a") if run_log is not None else None
    service = Executor(settings, namespace, worker, seconds, fail_every, log, command, state_dir, term_grace, connect)
    try:
        serve_until_stopped(service.run, None)
    finally:
        if log is not None:
            log.close()


def _secret(path: Path) -> str:
    from streams.dispatcher.auth import private

    private(path, "the token file")  # a token readable by others is no secret
    return path.read_text().strip()


def _client(bootstrap: str | None, topic_prefix: str | None, namespace: str,
            call: Callable[[Any], Awaitable[Any]]) -> Any:
    from aiokafka.errors import KafkaError

    from streams import kafka
    from streams.dispatcher import DispatcherClient

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)

    async def go() -> Any:
        async with DispatcherClient(settings, namespace) as client:
            return await call(client)

    try:
        return asyncio.run(go())
    except KafkaError as e:
        raise TribunalError(f"cannot write to {settings.kafka_bootstrap}: {kafka.reason(e)}") from None


def _echo_written(what: str, written: Any) -> None:
    typer.echo(f"{what}: {written.topic}[{written.partition}]@{written.offset}")


@jobs_cli.command("assign")
def jobs_assign(worker: Annotated[str, typer.Option(help="Worker (tenant) the jobs belong to")],
                namespace: Namespace = "default",
                count: Annotated[int, typer.Option(min=1, max=MAX_JOBS_PER_ASSIGN, help="How many jobs")] = 1,
                start: Annotated[int | None, typer.Option(help="Expected start, ms since the epoch "
                                                          "(default: now + --in)")] = None,
                start_in: Annotated[float, typer.Option("--in", help="Seconds from now to the expected start")] = 0.0,
                window: Annotated[float, typer.Option(min=0, help="Seconds from the expected start to the "
                                                      "last acceptable start")] = 0.0,
                external_id: Annotated[str, typer.Option(help="External id prefix (job i gets PREFIX-i)")] = "job",
                info: Annotated[str, typer.Option(help="Opaque info handed to the listener")] = "",
                max_retries: Annotated[int, typer.Option(min=0)] = 0,
                timeout_ms: Annotated[int, typer.Option(min=1)] = 60_000,
                request_id: Annotated[str | None, typer.Option(help="Echoed in JobsAccepted")] = None,
                bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Assign jobs (the seed's JobAssign): expected at START, acceptable starts spread over the window."""
    from streams.dispatcher import JobAssign

    first = start if start is not None else int((time.time() + start_in) * 1000)
    assign = JobAssign(worker).start(first).end(first + int(window * 1000))
    for i in range(count):
        assign.job(f"{external_id}-{i}" if count > 1 else external_id, info, max_retries, timeout_ms)
    if request_id:
        assign.request(request_id)
    assigned = _client(bootstrap, topic_prefix, namespace, lambda c: c.assign_job(assign))
    _echo_written(f"assigned {count} job(s) to {worker} in {namespace}", assigned.written)
    for uuid in assigned.uuids:
        typer.echo(uuid)


def _job_command(verb: str) -> Callable[..., None]:
    def command(uuid: Annotated[str, typer.Argument(help="The job's uuid")], namespace: Namespace = "default",
                error: Annotated[str, typer.Option(help="Why it failed (fail only)")] = "",
                attempt: Annotated[int | None, typer.Option(
                    min=1, help="The attempt this ends, as its JobStarted numbered it (finish and fail; "
                                "without it, whichever attempt is running)")] = None,
                bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
        calls = {"finish": lambda c: c.finish_job(uuid, attempt), "fail": lambda c: c.fail_job(uuid, error, attempt),
                 "cancel": lambda c: c.cancel_job(uuid)}
        _echo_written(f"{verb} {uuid}", _client(bootstrap, topic_prefix, namespace, calls[verb]))

    command.__doc__ = {"finish": "Report a running job done (the seed's finishJob).",
                       "fail": "Report a running job's attempt failed (retried while attempts remain).",
                       "cancel": "Cancel a pending or running job."}[verb]
    return command


for _verb in ("finish", "fail", "cancel"):
    jobs_cli.command(_verb)(_job_command(_verb))


@jobs_cli.command("max")
def jobs_max(threads: Annotated[int, typer.Option(min=0, help="Jobs that may run at once")],
             namespace: Namespace = "default",
             worker: Annotated[str | None, typer.Option(help="A worker's cap instead of the namespace's")] = None,
             bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Set the namespace's cap (the seed's setMaxThreads) or one worker's."""
    if worker is None:
        written = _client(bootstrap, topic_prefix, namespace, lambda c: c.set_max_threads(threads))
        _echo_written(f"namespace {namespace}: at most {threads} running", written)
    else:
        written = _client(bootstrap, topic_prefix, namespace, lambda c: c.set_worker_max(worker, threads))
        _echo_written(f"worker {worker} in {namespace}: at most {threads} running", written)


@jobs_cli.command("show")
def jobs_show(uuid: Annotated[str, typer.Argument(help="The job's uuid")], namespace: Namespace = "default",
              history: Annotated[bool, typer.Option(help=(
                  "Also its whole history from the log: who assigned it, each start, who failed, finished or "
                  "cancelled it (always, for a job no longer held)"))] = False,
              web: Web = None, bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """A pending or running job as the worker holds it (with who assigned it); a job that has ended, its history
    from the log."""
    from streams.clients import worker_page
    from streams.errors import NotFound

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    try:
        body = worker_page(web or settings.web, "dispatch", namespace, uuid)
    except NotFound:
        body = None
    if body is not None:
        typer.echo(json.dumps(body, indent=2, sort_keys=True))
        if not history:
            return
    from streams.audit.jobs import job_history, render_history
    from streams.audit.kafka_log import KafkaLog

    try:
        found = job_history(KafkaLog.read(settings), settings, uuid, namespace)
    except NotFound:
        raise NotFound(f"job {uuid} is neither pending nor running in namespace {namespace!r} nor in its log: "
                       "never assigned there, or its assign is not decided yet") from None
    typer.echo(render_history(found))


api_cli = typer.Typer(rich_markup_mode=None, invoke_without_command=True,
                      help="Serve the dispatcher's REST API; `token ...` manages who may call it.")
dispatch_cli.add_typer(api_cli, name="api")
token_cli = group("The API's identities: tokens kept hashed in an auth file, roles per namespace.")
api_cli.add_typer(token_cli, name="token")
AuthFileOption = Annotated[Path, typer.Option("--auth-file", help="The auth file (created readable by its owner "
                                              "only)")]


@api_cli.callback()
def dispatcher_api(ctx: typer.Context, host: ListenHost = "127.0.0.1",
                   port: Annotated[int, typer.Option(help="Port to listen on")] = 8080,
                   auth_file: Annotated[Path | None, typer.Option(help=(
                       "Identities (tribunal dispatch api token create): every request but /openapi.json then "
                       "needs a bearer token or a client certificate, and every command names its sender"))] = None,
                   tls_cert: TlsCert = None, tls_key: TlsKey = None, tls_client_ca: TlsClientCa = None,
                   insecure: Insecure = False,
                   rate: Annotated[float, typer.Option(min=0.1, help="Requests a second per identity (429 "
                                                       "past it)")] = 50.0,
                   burst: Annotated[float, typer.Option(min=1, help="Requests an identity may send at once")] = 100.0,
                   max_body: Annotated[int, typer.Option(min=1024, help="Largest request body, bytes (413 past "
                                                         "it)")] = 1 << 20,
                   web: Web = None, bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Serve the dispatcher's REST API (OpenAPI at /openapi.json): writes to Kafka, reads from the worker, a
    worker's starts as server-sent events."""
    if ctx.invoked_subcommand is not None:
        return
    from streams.dispatcher import api
    from streams.dispatcher.guard import Rates

    keyring, tls = secured(host, auth_file, tls_cert, tls_key, tls_client_ca, insecure, "the dispatcher's API")
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    serve_until_stopped(lambda: api.serve(settings, host, port, web or settings.web, keyring, tls, Rates(rate, burst),
                                          max_body), None)


@token_cli.command("create")
def token_create(name: Annotated[str, typer.Option(help="Who it is: the principal its commands carry (never "
                                                   "reused)")],
                 role: Annotated[str, typer.Option(help="admin (everything, caps included), tenant (one worker's "
                                                   "assigns and jobs) or reader (GETs only)")],
                 namespace: Annotated[list[str], typer.Option("--namespace", "-n", help=(
                     "A namespace it acts in (repeatable; '*' for every one)"))],
                 auth_file: AuthFileOption,
                 worker: Annotated[str | None, typer.Option(help="The worker a tenant acts for")] = None) -> None:
    """Make an identity and print its token once, as the last line (the file keeps only its hash)."""
    from streams.dispatcher.auth import AuthFile

    token = AuthFile(auth_file).create(name, role, tuple(namespace), worker)
    typer.echo(f"created {role} {name!r} in {', '.join(sorted(set(namespace)))}"
               + (f" for worker {worker!r}" if worker else "") + f" ({auth_file}); its token, shown only now:",
               err=True)
    typer.echo(token)


@token_cli.command("list")
def token_list(auth_file: AuthFileOption,
               as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line")] = False) -> None:
    """Every identity, revoked ones included (no token, no hash)."""
    from streams.dispatcher.auth import AuthFile

    for identity in AuthFile(auth_file).read():
        shown = identity.public()
        if as_json:
            typer.echo(json.dumps(shown, sort_keys=True))
        else:
            state = "revoked" if identity.revoked is not None else "live"
            typer.echo(f"{identity.name}\t{identity.role}\t{','.join(identity.namespaces)}\t"
                       f"{identity.worker or '-'}\t{state}")


@token_cli.command("revoke")
def token_revoke(name: Annotated[str, typer.Argument(help="The identity's name")], auth_file: AuthFileOption) -> None:
    """Revoke an identity (its token and any certificate naming it): refused from the API's next request on."""
    from streams.dispatcher.auth import AuthFile

    AuthFile(auth_file).revoke(name)
    typer.echo(f"revoked {name!r}")
