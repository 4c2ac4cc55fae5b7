"""What every command family shares: the `tribunal` Typer app and its groups, common options, settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from streams.errors import TribunalError
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


def settings_from(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


policy_cli = typer.Typer(no_args_is_help=True, help="Validate policy documents (YAML or JSON).")
cli.add_typer(policy_cli, name="policy")
dlq_cli = typer.Typer(no_args_is_help=True, help="Dead letters: produce them again once their cause is fixed.")
cli.add_typer(dlq_cli, name="dlq")

FromBound = Annotated[str | None, typer.Option("--from", help="First record: an offset (every partition) or a "
                                               "time, e.g. 2026-11-22T14:02:00Z")]
ToBound = Annotated[str | None, typer.Option("--to", help="Stop before this offset or time")]


def open_file(path: Path, mode: str) -> Any:
    try:
        return path.open(mode)
    except OSError as e:
        raise TribunalError(f"cannot open {path}: {e.strerror}") from None
