"""`tribunal pools actuate`, `pools keda-scaler` and `tribunal demo`: the decisions applied, served and shown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streams.cli.base import (
    Bootstrap,
    Prefix,
    Root,
    SessionTimeout,
    ZkHosts,
    cli,
    pools_cli,
    serve_until_stopped,
    settings_from,
)

Pool = Annotated[str, typer.Option("--pool", "-p", help="The decider pool")]


@pools_cli.command("actuate")
def actuate(pool: Pool,
            target: Annotated[str, typer.Option(help="process, exec, webhook, or a module:callable of your own")],
            command: Annotated[str | None, typer.Option(help=(
                "process: what a copy runs ({pool} {app} {index}); exec: what a change runs ({pool} {app} "
                "{instances} {seq}), e.g. 'kubectl scale deploy/{app} --replicas={instances}'"))] = None,
            observe_command: Annotated[str | None, typer.Option(help=(
                "exec: prints an app's running count ({pool} {app}); without it what was applied is trusted"))] = None,
            url: Annotated[str | None, typer.Option(help="webhook: where the desired state is POSTed")] = None,
            secret_file: Annotated[Path | None, typer.Option(help="webhook: HMAC-SHA256 key of the signature")] = None,
            state_dir: Annotated[Path, typer.Option(help="process: the copies' pid files and logs")] = Path(
                ".tribunal-actuator"),
            timeout: Annotated[float, typer.Option(min=0.1, help="exec, webhook: seconds one call may take")] = 30.0,
            grace: Annotated[float, typer.Option(min=0, help="process: seconds from SIGTERM to SIGKILL")] = 10.0,
            start_seconds: Annotated[float, typer.Option(min=0, help=(
                "process: seconds a copy must run for its death not to count as a crash; dying sooner twice in a "
                "row is a crash loop: restarts back off and the app is not put right"))] = 10.0,
            max_backoff: Annotated[float, typer.Option(min=0.5, help=(
                "process: the longest wait before a crash-looping copy starts again (from 0.5 s, doubling)"))] = 300.0,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="Log what would be applied only")] = False,
            interval: Annotated[float, typer.Option(min=0.05, help="Seconds between observations")] = 1.0,
            report_after: Annotated[float, typer.Option(min=0, help=(
                "Seconds a difference the target cannot put right lasts before the decider is told"))] = 10.0,
            election: Annotated[bool, typer.Option(help="Stand in the pool's actuator election (ZooKeeper)")] = True,
            stop_on_exit: Annotated[bool, typer.Option(help="process: stop the copies as the actuator stops")] = False,
            metrics_port: Annotated[int, typer.Option(help=(
                "Serve /metrics on this port (0: none): per app of the pool, what was applied, drift, lag and "
                "restarts, unauthenticated"))] = 0,
            metrics_host: Annotated[str, typer.Option(help="Address /metrics listens on (default loopback only)")
                                    ] = "127.0.0.1",
            bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
            root: Root = "/tribunal", session_timeout: SessionTimeout = 6.0) -> None:
    """Make a target run what the pool's decisions say, put back what drifts, and tell the decider what lasts."""
    import asyncio

    from streams.decider.actuator import Actuator
    from streams.decider.targets import TargetOptions, build

    settings = settings_from(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)
    options = TargetOptions(command=command, observe_command=observe_command, url=url, secret_file=secret_file,
                            state_dir=state_dir, timeout=timeout, grace=grace, start_seconds=start_seconds,
                            max_backoff=max_backoff)
    actuator = Actuator(settings, pool, build(target, options), dry_run=dry_run, interval=interval,
                        report_after=report_after, election=election, root=root, session_timeout=session_timeout)
    if metrics_port:
        actuator.metrics.serve(metrics_host, metrics_port)

    async def run() -> None:
        try:
            await actuator.run()
        finally:
            stop_all = getattr(actuator.target, "stop_all", None)
            if stop_on_exit and stop_all is not None:
                await asyncio.shield(stop_all(pool))

    serve_until_stopped(run, actuator.stop)


@pools_cli.command("keda-scaler")
def keda_scaler(port: Annotated[int, typer.Option(help="Port the gRPC server listens on")] = 9090,
                host: Annotated[str, typer.Option(help=(
                    "Address it listens on (default loopback only): it serves every pool's decided instances to "
                    "whoever asks, unless --tls-client-ca requires a client certificate"))] = "127.0.0.1",
                tls_cert: Annotated[Path | None, typer.Option(help="PEM certificate: serve TLS")] = None,
                tls_key: Annotated[Path | None, typer.Option(help="PEM private key of --tls-cert")] = None,
                tls_client_ca: Annotated[Path | None, typer.Option(help=(
                    "PEM CA: require client certificates it signed (mutual TLS)"))] = None,
                bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """KEDA's external scaler: each ScaledObject's app (metadata `pool`, `app`) at tribunal's decided instances."""
    from streams.decider.keda.scaler import Tls, serve
    from streams.errors import ConfigError

    if (tls_cert is None) != (tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    tls = Tls(tls_cert, tls_key, tls_client_ca) if tls_cert is not None and tls_key is not None else None
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    serve_until_stopped(lambda: serve(settings, host, port, tls), None)


@cli.command("demo")
def demo(seconds: Annotated[float, typer.Option(min=10, help="How long the load curve runs")] = 60.0,
         pool: Annotated[str | None, typer.Option(help="The pool (default: a new one, demo-<epoch seconds>)")] = None,
         output_file: Annotated[Path, typer.Option("--output", "-o", help="The report to write")] = Path(
             "demo-report.html"),
         state_dir: Annotated[Path, typer.Option(help="The copies' pid files and logs")] = Path(".tribunal-demo"),
         bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """The loop in a minute, on a running worker (`make run`): load through the client, decisions, an actuator
    running `sleep` copies, a copy killed and put back; then the pool's report."""
    import asyncio
    import datetime
    import time

    from streams.cli.audit import report
    from streams.decider.demo import run
    from streams.topics import create_topics

    pool = pool or f"demo-{int(time.time())}"
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    create_topics(settings)
    began = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    asyncio.run(run(settings, seconds, pool, state_dir, typer.echo))
    report(output_file=output_file, pool=pool, start=began, bootstrap=bootstrap, topic_prefix=topic_prefix)
