"""Manual balancing through the offline list, as the seed does it by hand (seed 001 §4.3, §6).

The most loaded online scheduler goes on the offline list until it has released down to the mean
(rounded up); the jobs it releases become orphans that the limits fold offers to the least loaded
schedulers; then it comes back online. Repeat until no two online schedulers differ by more than
one job. Nothing moves by force: each job is released by its owner and taken through the lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from streams.errors import TribunalError
from streams.zk.layout import Layout


def owned_by(zk: Any, layout: Layout, group: str) -> tuple[dict[str, int], int]:
    """Jobs held per online scheduler (registered, not offline), and how many jobs have no owner."""
    from kazoo.exceptions import NoNodeError

    online = set(zk.get_children(layout.dir(group, "schedulers"))) - set(zk.get_children(layout.dir(group, "offline")))
    held = dict.fromkeys(online, 0)
    owned = 0
    for job in zk.get_children(layout.dir(group, "owners")):
        try:
            owner = zk.get(layout.node(group, "owners", job))[0].decode()
        except NoNodeError:
            continue
        owned += 1
        if owner in held:
            held[owner] += 1
    return held, len(zk.get_children(layout.dir(group, "jobs"))) - owned


def _wait(what: str, done: Callable[[], bool], deadline: float, poll: float) -> None:
    while not done():
        if time.monotonic() > deadline:
            raise TribunalError(f"rebalance: timed out waiting until {what}")
        time.sleep(poll)


def rebalance(zk: Any, layout: Layout, group: str, timeout: float = 120.0, poll: float = 0.2,
              say: Callable[[str], None] = print) -> list[tuple[str, int, int]]:
    """Balance `group`; returns the moves made as (scheduler, held before, held after)."""
    deadline = time.monotonic() + timeout
    moves: list[tuple[str, int, int]] = []
    while True:
        _wait("every job has an owner", lambda: owned_by(zk, layout, group)[1] == 0, deadline, poll)
        held, _ = owned_by(zk, layout, group)
        if len(held) < 2:
            return moves
        most = max(sorted(held), key=lambda s: held[s])
        least = min(sorted(held), key=lambda s: held[s])
        if held[most] - held[least] <= 1:
            return moves
        target = math.ceil(sum(held.values()) / len(held))
        say(f"{most} holds {held[most]} jobs, {least} {held[least]}: {most} goes offline until it holds {target}")
        offline = layout.node(group, "offline", most)
        zk.ensure_path(offline)
        try:
            _wait(f"{most} holds {target} jobs", _at_most(zk, layout, group, most, target), deadline, poll)
        finally:
            zk.delete(offline)
        moves.append((most, held[most], _held_by(zk, layout, group, most)))


def _at_most(zk: Any, layout: Layout, group: str, scheduler: str, target: int) -> Callable[[], bool]:
    return lambda: _held_by(zk, layout, group, scheduler) <= target


def _held_by(zk: Any, layout: Layout, group: str, scheduler: str) -> int:
    from kazoo.exceptions import NoNodeError

    count = 0
    for job in zk.get_children(layout.dir(group, "owners")):
        try:
            count += zk.get(layout.node(group, "owners", job))[0].decode() == scheduler
        except NoNodeError:
            continue
    return count
