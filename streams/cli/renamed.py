"""The command line's old flat names, each resolved to its noun and verb (`tribunal metric` is now `tribunal pools
metric`), so that users' scripts keep working while they move.

An old name runs the new command and says, on stderr, what to type instead; `TRIBUNAL_OLD_NAMES=error` refuses it
(exit 2), for a script's owner who wants to find every old name before the aliases go (the test suite runs so).
The aliases stay until tribunal 0.3.0, and at least until 2027-06-01 (docs/changelog.md). Old names are not
listed in `--help`.
"""

from __future__ import annotations

import os
from typing import Any

import typer
from typer.core import TyperGroup

# old name -> the path that replaced it; an old family (`jobs`, `dlq`) keeps its verbs under the new path
RENAMED: dict[str, tuple[str, ...]] = {
    "metric": ("pools", "metric"), "state": ("pools", "state"), "policy": ("pools", "policy"),
    "actuate": ("pools", "actuate"), "keda-scaler": ("pools", "keda-scaler"),
    "zk-bridge": ("groups", "bridge"), "scheduler": ("groups", "scheduler"), "rebalance": ("groups", "rebalance"),
    "jobs": ("dispatch", "jobs"), "ticker": ("dispatch", "ticker"), "executor": ("dispatch", "executor"),
    "dispatcher-api": ("dispatch", "api"),
    "shard-node": ("shards", "node"), "shard-tasks": ("shards", "tasks"), "task-processes": ("shards", "processes"),
    "export": ("audit", "export"), "replay": ("audit", "replay"), "explain": ("audit", "explain"),
    "report": ("audit", "report"), "what-if": ("audit", "what-if"),
    "tail": ("topics", "tail"), "dlq": ("topics",), "acl": ("infra", "acl"),
}
STRICT_ENV = "TRIBUNAL_OLD_NAMES"


class Nouns(TyperGroup):
    """The root group: a name it does not hold may be an old one."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:  # typer.Context: Typer vendors its own Click
        path = RENAMED.get(cmd_name)
        if path is None:
            return super().get_command(ctx, cmd_name)
        if cmd_name == "dlq":  # its one verb went to `topics`; `dlq create` must not become `topics create`
            say(ctx, "tribunal dlq redrive", "tribunal topics redrive")
            return TyperGroup(name="dlq", commands={"redrive": _walk(self, ctx, ("topics", "redrive"))},
                              help="`tribunal topics redrive` now.")
        say(ctx, f"tribunal {cmd_name}", f"tribunal {' '.join(path)}")
        return _walk(self, ctx, path)


def say(ctx: Any, old: str, new: str) -> None:
    """Tell on stderr that `old` is now `new`, or refuse it (exit 2) under `TRIBUNAL_OLD_NAMES=error`."""
    said = f"`{old}` is now `{new}`"
    if os.environ.get(STRICT_ENV) == "error":
        typer.echo(f"tribunal: {said} (the old name is refused: {STRICT_ENV}=error)", err=True)
        ctx.exit(2)
    typer.echo(f"tribunal: {said}; the old name works until tribunal 0.3.0", err=True)


def _walk(command: Any, ctx: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        command = command.get_command(ctx, name)
    return command
