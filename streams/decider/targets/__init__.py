"""What an actuator applies decisions to: one small interface, and the targets tribunal ships.

A target sets absolute counts (`apply`) and says what runs (`observe`), as the Nomad Autoscaler's target plugins
and Kubernetes' scale subresource do. Because a change names the count an app should have, never a delta,
applying one twice does no harm: that is what lets the actuator be at-least-once end to end (after a crash it
applies the desired state again rather than remember what it did).

A user's own target is a class with these three coroutines, named on the command line as `module:callable`
(called with the `TargetOptions`).
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from streams.errors import ConfigError, TribunalError


@dataclass(frozen=True)
class Change:
    """Set each app of `instances` to its count, in pool `pool`, as decision `seq` wants (`desired`: every app)."""

    pool: str
    seq: int
    instances: Mapping[str, int]
    desired: Mapping[str, int]

    @property
    def key(self) -> str:
        """The idempotency key of what this change brings about: the pool's desired state as of `seq`."""
        return f"{self.pool}:{self.seq}"


class ActuationFailed(TribunalError):
    """A change a target could not make: `failed` maps each app not set to why (the others of the change are set);
    given as a collection of apps, each fails with the message. A target that backs off on its own (the `process`
    target's restarts) says in `retry_after` when trying again can first help, in seconds."""

    def __init__(self, message: str, failed: Mapping[str, str] | Collection[str],
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.failed: dict[str, str] = (dict(failed) if isinstance(failed, Mapping)
                                       else dict.fromkeys(failed, message))
        self.retry_after = retry_after


class Target(Protocol):
    name: str

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        """What runs now, per app; an app left out is one the target cannot see (the actuator then trusts what it
        last applied)."""
        ...

    async def apply(self, change: Change) -> None:
        """Set every app of the change to its count (raise `ActuationFailed` naming the apps not set)."""
        ...

    async def close(self) -> None: ...


def backoff(attempt: int, first: float, most: float) -> float:
    """The wait before try `attempt` (1: the first retry) of something that keeps failing: `first`, doubling each
    time, never more than `most`. The actuator's failed passes and the process target's restarts both wait so."""
    return min(most, first * 2 ** (attempt - 1))


def instrument(target: Target, metrics: object) -> None:
    """Hand the actuator's metrics to a target that shows its own (an optional `instrument(metrics)` method)."""
    hook = getattr(target, "instrument", None)
    if callable(hook):
        hook(metrics)


@dataclass(frozen=True)
class TargetOptions:
    """Every target's settings, from `tribunal pools actuate`'s options (each target reads its own)."""

    command: str | None = None  # process: the command a copy runs; exec: the command a change runs
    observe_command: str | None = None  # exec: prints an app's running count
    url: str | None = None  # webhook
    secret_file: Path | None = None  # webhook: the HMAC-SHA256 key
    state_dir: Path = Path(".tribunal-actuator")  # process: the copies' pid files and logs
    timeout: float = 30.0  # exec and webhook: one call's limit, in seconds
    grace: float = 10.0  # process: how long a copy told to stop (SIGTERM) has before SIGKILL
    start_seconds: float = 10.0  # process: how long a copy runs before a death of it is no longer a crash
    max_backoff: float = 300.0  # process: the longest wait before restarting a crash-looping copy


def build(kind: str, options: TargetOptions) -> Target:
    """The target `kind` names: `process`, `exec`, `webhook`, or a user's `module:callable`."""
    if kind == "process":
        from streams.decider.targets.process import ProcessTarget

        return ProcessTarget(_needed(options.command, "process", "--command"), options.state_dir, options.grace,
                             options.start_seconds, options.max_backoff)
    if kind == "exec":
        from streams.decider.targets.command import CommandTarget

        return CommandTarget(_needed(options.command, "exec", "--command"), options.observe_command, options.timeout)
    if kind == "webhook":
        from streams.decider.targets.webhook import WebhookTarget

        return WebhookTarget(_needed(options.url, "webhook", "--url"), options.secret_file, options.timeout)
    module, _, name = kind.partition(":")
    if not name:
        raise ConfigError(f"unknown target {kind!r}: process, exec, webhook, or module:callable")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"target {kind!r}: {e}") from None
    target: Target = factory(options)
    return target


def _needed(value: str | None, kind: str, option: str) -> str:
    if not value:
        raise ConfigError(f"the {kind} target needs {option}")
    return value
