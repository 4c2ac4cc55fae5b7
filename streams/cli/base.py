"""What every command family shares: the `tribunal` Typer app and its groups, common options, settings."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from streams.cli.renamed import Nouns
from streams.errors import TribunalError
from streams.settings import Settings

# Click's own help, not Rich's panels: at 80 columns Rich cut option names short (`--observe-comm…`), and a user
# cannot type a flag they cannot read; Click wraps the help and never the names. The old flat names are resolved by
# `streams.cli.renamed`.
cli = typer.Typer(cls=Nouns, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  rich_markup_mode=None, help="tribunal: an event-sourced control plane for elastic scheduling.\n\n"
                  "A noun, then a verb: `tribunal pools metric`, `tribunal dispatch jobs show`. The first "
                  "commands stand alone: `run` (everything on this machine), `demo`, `worker`, `console`.")


def group(summary: str) -> typer.Typer:
    """A family of commands (`tribunal infra ...`), its help as plain as the app's."""
    return typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=summary)


# The nouns, in the order `tribunal --help` lists them: the four folds, the audit, then the plumbing.
pools_cli = group("Pools: load scores in, the decider's and justice's decisions out, and what acts on them.")
groups_cli = group("Scheduler groups: ZooKeeper's membership to Kafka, rejection limits, demonstration schedulers.")
dispatch_cli = group("The dispatcher: jobs, their caps, the clock, executors and the REST API.")
shards_cli = group("Shard plans: nodes, task counts and the processes that run tasks.")
audit_cli = group("The audit: export, replay, explain, report and what-if, all from the log.")
topics_cli = group("Tribunal's topics: create, list, follow, redrive dead letters.")
infra_cli = group("Kafka and ZooKeeper: run them on 127.0.0.1 (no Docker); set the ACLs tribunal needs.")
for _name, _noun in (("pools", pools_cli), ("groups", groups_cli), ("dispatch", dispatch_cli), ("shards", shards_cli),
                     ("audit", audit_cli), ("topics", topics_cli), ("infra", infra_cli)):
    cli.add_typer(_noun, name=_name)
acl_cli = group("Kafka ACLs: the least each of tribunal's principals needs.")
infra_cli.add_typer(acl_cli, name="acl")
policy_cli = group("Policy documents (YAML or JSON): validate, apply.")
pools_cli.add_typer(policy_cli, name="policy")

BOOTSTRAP_HELP = "Kafka bootstrap servers (default: $TRIBUNAL_KAFKA_BOOTSTRAP, $KAFKA_BOOTSTRAP, 127.0.0.1:9092)"
Bootstrap = Annotated[str | None, typer.Option("--bootstrap", "-b", help=BOOTSTRAP_HELP)]
Prefix = Annotated[str | None, typer.Option("--topic-prefix", help="Prefix of every topic name")]


def _secret_from(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text().strip()
    except OSError as e:
        raise TribunalError(f"cannot read {path}: {e.strerror}") from None


def _version(asked: bool) -> None:
    if asked:
        from streams import __version__
        from streams.compiled import running

        typer.echo(f"tribunal {__version__}; the core: {running()}")
        raise typer.Exit()


@cli.callback()
def connection(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="The version, and whether the core runs compiled or as pure Python")
                       ] = False,
    security_protocol: Annotated[str | None, typer.Option(
        help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default $TRIBUNAL_SECURITY_PROTOCOL, PLAINTEXT)")] = None,
    sasl_mechanism: Annotated[str | None, typer.Option(
        help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default $TRIBUNAL_SASL_MECHANISM, SCRAM-SHA-512)")] = None,
    sasl_username: Annotated[str | None, typer.Option(help="default $TRIBUNAL_SASL_USERNAME")] = None,
    sasl_password_file: Annotated[Path | None, typer.Option(
        help="A file holding the SASL password (default $TRIBUNAL_SASL_PASSWORD)")] = None,
    ssl_cafile: Annotated[Path | None, typer.Option(help="CA certificates, PEM (default $TRIBUNAL_SSL_CAFILE)")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(help="Client certificate, PEM")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="Client key, PEM")] = None,
    zookeeper_auth_file: Annotated[Path | None, typer.Option(
        help="A file holding 'user:password' for ZooKeeper (default $TRIBUNAL_ZOOKEEPER_AUTH)")] = None,
    log_format: Annotated[str | None, typer.Option(
        help="Logs of the worker and daemons: text, or json (one object a line; default $TRIBUNAL_LOG_FORMAT)")] = None,
) -> None:
    """How every Kafka and ZooKeeper client of the command connects, and how it logs; secrets come from files
    or the environment, never from the command line, where `ps` shows them."""
    import os

    given = {"SECURITY_PROTOCOL": security_protocol, "SASL_MECHANISM": sasl_mechanism,
             "SASL_USERNAME": sasl_username, "SASL_PASSWORD": _secret_from(sasl_password_file),
             "SSL_CAFILE": ssl_cafile, "SSL_CERTFILE": ssl_certfile, "SSL_KEYFILE": ssl_keyfile,
             "ZOOKEEPER_AUTH": _secret_from(zookeeper_auth_file), "LOG_FORMAT": log_format}
    for name, value in given.items():
        if value is not None:  # the settings of this process and of any it starts (a worker's re-execution)
            os.environ[f"TRIBUNAL_{name}"] = str(value)


def settings_from(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})



FromBound = Annotated[str | None, typer.Option("--from", help="First record: an offset (every partition) or a "
                                               "time, e.g. 2026-11-22T14:02:00Z")]
ToBound = Annotated[str | None, typer.Option("--to", help="Stop before this offset or time")]
JobSetOption = Annotated[str | None, typer.Option("--job-set", help="Shard job set")]
XOption = Annotated[Literal["time", "order"], typer.Option(
    "--x", help="The plots' x axis: time (of day, UTC), or input order (a burst of reports reads as a sequence)")]
Web = Annotated[str | None, typer.Option(help="Worker web endpoint host:port (default "
                                         "$TRIBUNAL_WEB_HOST:$TRIBUNAL_WEB_PORT)")]

def fold_named(option: str) -> str:
    """The fold a key's option names (`pool` -> `pools`): each fold says what its keys are called (`key_name`)."""
    from streams.core.folds import FOLDS  # the folds load only for the commands that name one

    return next((fold.name for fold in FOLDS if fold.key_name == option), "")


def one_key(**keys: str | None) -> tuple[str, str] | None:
    """The one (option, key) given among `--pool`, `--group`, `--namespace`, `--job-set`; None unless exactly one
    is."""
    named = [(kind, key) for kind, key in keys.items() if key is not None]
    return named[0] if len(named) == 1 else None


def open_file(path: Path, mode: str) -> Any:
    try:
        return path.open(mode)
    except OSError as e:
        raise TribunalError(f"cannot open {path}: {e.strerror}") from None


# -- long-running services: the bridge, schedulers, the ticker, executors, the dispatcher API ----
ZkHosts = Annotated[str | None, typer.Option("--zookeeper", "-z", help="ZooKeeper hosts (default "
                                             "$TRIBUNAL_ZOOKEEPER_HOSTS, $ZOOKEEPER_HOSTS, 127.0.0.1:2181)")]
Root = Annotated[str, typer.Option("--root", help="ZooKeeper root of the scheduler groups")]
SessionTimeout = Annotated[float, typer.Option("--session-timeout", help="ZooKeeper session timeout, seconds")]


# -- HTTP servers others may reach: the dispatcher's API and the console ------------------------
ListenHost = Annotated[str, typer.Option("--host", help="Address to listen on (other than loopback only with "
                                         "--auth-file, or --insecure)")]
TlsCert = Annotated[Path | None, typer.Option(help="PEM certificate: serve HTTPS")]
TlsKey = Annotated[Path | None, typer.Option(help="PEM private key of --tls-cert")]
TlsClientCa = Annotated[Path | None, typer.Option(help=(
    "PEM CA: a client certificate it signed stands for the identity its common name names"))]
Insecure = Annotated[bool, typer.Option(help=(
    "Serve without --auth-file on an address others can reach: anyone there may then set caps, cancel any "
    "tenant's jobs (and, in the console, redrive dead letters)"))]


def secured(host: str, auth_file: Path | None, tls_cert: Path | None, tls_key: Path | None,
            tls_client_ca: Path | None, insecure: bool, what: str) -> tuple[Any, Any]:
    """The keyring and TLS context a server of `what` runs with, once the options are checked (a server others
    may reach without an auth file is refused unless `insecure`)."""
    from streams.dispatcher.auth import Keyring
    from streams.dispatcher.guard import check_exposure, server_tls
    from streams.errors import ConfigError

    check_exposure(host, auth_file, insecure, what)
    if (tls_cert is None) != (tls_key is None) or (tls_client_ca is not None and tls_cert is None):
        raise ConfigError("--tls-cert and --tls-key go together, and --tls-client-ca needs them")
    keyring = Keyring(auth_file) if auth_file is not None else None
    tls = server_tls(tls_cert, tls_key, tls_client_ca) if tls_cert is not None and tls_key is not None else None
    return keyring, tls


def serve(make: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run an asyncio service, handed an event that SIGTERM or Ctrl-C sets, until it returns."""
    import logging
    import signal

    from streams import logs

    logs.configure(Settings().log_format)
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await make(stop)

    asyncio.run(main())


def serve_until_stopped(run: Callable[[], Awaitable[None]], stop_service: Callable[[], None] | None) -> None:
    """Run a service until it ends or SIGTERM / Ctrl-C asks it to stop (`stop_service`, else cancelled)."""
    import contextlib

    async def until(stop: asyncio.Event) -> None:
        task = asyncio.ensure_future(run())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if stop_service is not None:
            stop_service()
        else:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    serve(until)


def load_policy(file: Path, version: str | None, capacity: int | None = None) -> Any:
    """The validated policy in `file`, or every problem on stderr and exit status 1."""
    from streams.policy_files import PolicyInvalid, load

    try:
        return load(file, version, capacity)
    except PolicyInvalid as e:
        for problem in e.problems:
            typer.echo(f"{file}: {problem}", err=True)
        raise typer.Exit(1) from None
