"""Every command's `--help` at 80 columns shows every option's whole name (issue 46: Rich's panels cut
`--observe-command` to `--observe-comm…`, and a user cannot type a flag they cannot read)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main
from typer.testing import CliRunner

from streams.cli import cli


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under `group` (Typer's own Click classes: read by their attributes, not their types)."""
    yield path, group
    for name, command in sorted(getattr(group, "commands", {}).items()):
        yield from commands(command, (*path, name))


def test_every_commands_help_at_80_columns_shows_every_options_whole_name() -> None:
    root = typer.main.get_command(cli)
    runner = CliRunner()
    seen = 0
    for path, command in commands(root):
        result = runner.invoke(cli, [*path, "--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        assert "…" not in text, (path, text)
        assert max(len(line) for line in text.splitlines()) <= 80, (path, text)
        for param in command.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                for name in (*param.opts, *param.secondary_opts):
                    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), (path, name, text)
                    seen += 1
    assert seen > 150  # every command was rendered, the actuator's many options among them
