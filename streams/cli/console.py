"""`tribunal console`: the control plane on live web pages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streams.cli.base import (
    Bootstrap,
    Insecure,
    ListenHost,
    Prefix,
    TlsCert,
    TlsClientCa,
    TlsKey,
    Web,
    cli,
    secured,
    serve_until_stopped,
    settings_from,
)


@cli.command("console")
def console(host: ListenHost = "127.0.0.1", port: Annotated[int, typer.Option(help="Port to listen on")] = 8090,
            auth_file: Annotated[Path | None, typer.Option(help=(
                "The dispatcher API's identities (tribunal dispatch api token create): every page then needs "
                "one (sign in with a token), and actions pass the API's role checks"))] = None,
            tls_cert: TlsCert = None, tls_key: TlsKey = None, tls_client_ca: TlsClientCa = None,
            insecure: Insecure = False,
            state_dir: Annotated[list[Path] | None, typer.Option(help=(
                "A shard nodes' state directory whose task processes a job set's page lists (repeatable)"))] = None,
            web: Web = None, bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Serve the console: every pool, namespace, scheduler group, job set and dead letter on live pages."""
    from streams.console import server

    keyring, tls = secured(host, auth_file, tls_cert, tls_key, tls_client_ca, insecure, "the console")
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    serve_until_stopped(lambda: server.serve(settings, host, port, web or settings.web, keyring, tls,
                                             tuple(state_dir or ())), None)
