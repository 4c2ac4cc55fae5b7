"""`tribunal console`: the control plane on live web pages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streams.cli.base import Bootstrap, Prefix, Web, cli, serve_until_stopped, settings_from


@cli.command("console")
def console(host: Annotated[str, typer.Option(help="Address to listen on (other than loopback only with "
                                              "--auth-file, or --insecure)")] = "127.0.0.1",
            port: Annotated[int, typer.Option(help="Port to listen on")] = 8090,
            auth_file: Annotated[Path | None, typer.Option(help=(
                "The dispatcher API's identities (tribunal dispatcher-api token create): every page then needs "
                "one (sign in with a token), and actions pass the API's role checks"))] = None,
            tls_cert: Annotated[Path | None, typer.Option(help="PEM certificate: serve HTTPS")] = None,
            tls_key: Annotated[Path | None, typer.Option(help="PEM private key of --tls-cert")] = None,
            tls_client_ca: Annotated[Path | None, typer.Option(help=(
                "PEM CA: a client certificate it signed stands for the identity its common name names"))] = None,
            insecure: Annotated[bool, typer.Option(help=(
                "Serve without --auth-file on an address others can reach: anyone there may then set caps, "
                "cancel jobs and redrive dead letters"))] = False,
            state_dir: Annotated[list[Path] | None, typer.Option(help=(
                "A shard nodes' state directory whose task processes a job set's page lists (repeatable)"))] = None,
            web: Web = None, bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Serve the console: every pool, namespace, scheduler group, job set and dead letter on live pages."""
    from streams.console import server
    from streams.dispatcher.auth import Keyring
    from streams.dispatcher.guard import check_exposure, server_tls
    from streams.errors import ConfigError

    check_exposure(host, auth_file, insecure, "the console")
    if (tls_cert is None) != (tls_key is None) or (tls_client_ca is not None and tls_cert is None):
        raise ConfigError("--tls-cert and --tls-key go together, and --tls-client-ca needs them")
    keyring = Keyring(auth_file) if auth_file is not None else None
    tls = server_tls(tls_cert, tls_key, tls_client_ca) if tls_cert is not None and tls_key is not None else None
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    serve_until_stopped(lambda: server.serve(settings, host, port, web or settings.web, keyring, tls,
                                             tuple(state_dir or ())), None)
