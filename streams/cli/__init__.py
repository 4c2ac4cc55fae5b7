"""The `tribunal` command line: one module per family (infra, worker, groups, dispatch, records, audit).

Every failure tribunal anticipates is a `TribunalError`, printed as one line on stderr with exit
status 1; settings come from flags, then `TRIBUNAL_*` / `KAFKA_BOOTSTRAP` environment variables.
"""

from __future__ import annotations

import typer
from pydantic import ValidationError

from streams.cli.base import cli
from streams.errors import ConfigError, TribunalError
from streams.settings import Settings

# isort: off
from streams.cli import infra, worker, groups, dispatch, decider, shards, records, audit, console  # noqa: F401  (each registers its commands, in help's order)
# isort: on

__all__ = ["cli", "main", "register_folds"]


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
        if folds.BY_NAME.get(fold.name) is not fold:
            try:
                folds.register(fold)
            except ValueError as e:  # a name or input topic another fold has
                raise ConfigError(f"TRIBUNAL_FOLDS entry {entry!r}: {e}") from None


def main() -> None:
    from aiokafka.errors import KafkaError

    from streams import kafka

    try:
        register_folds(Settings().folds)
        cli()
    except KafkaError as e:  # refused by an ACL, or no broker to be reached with these settings
        typer.echo(f"tribunal: Kafka: {kafka.reason(e)}", err=True)
        raise SystemExit(1) from None
    except TribunalError as e:
        typer.echo(f"tribunal: {e}", err=True)
        raise SystemExit(1) from None
    except ValidationError as e:  # a TRIBUNAL_* variable of the wrong type: one line, not a traceback
        typer.echo(f"tribunal: invalid settings: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}", err=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except (TimeoutError, OSError) as e:
        typer.echo(f"tribunal: {type(e).__name__}: {e}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
