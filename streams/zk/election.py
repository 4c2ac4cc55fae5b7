"""Standing for election in ZooKeeper (kazoo's Election recipe) until told to stop.

The bridge and the ticker each run one active process among their replicas: each replica stands
in its election, the elected one works in `lead` (on a thread of asyncio's pool: kazoo's recipe
blocks), and when its session ends
under the election it stands again with the session kazoo makes next.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def identifier() -> str:
    """Who stands: the host and thread, as the election's contenders list shows them."""
    return f"{socket.gethostname()}:{threading.get_native_id()}"


async def stand(zk: Any, path: str, lead: Callable[[], None], stopping: threading.Event,
                on_election: Callable[[Any], None] = lambda election: None) -> None:
    """Stand in `path`'s election until `stopping` is set; `lead()` runs whenever this process is elected
    and returns when its leadership should end. `on_election` receives each election, to cancel it."""
    from kazoo.exceptions import KazooException

    await asyncio.to_thread(zk.ensure_path, path)
    who = identifier()
    while not stopping.is_set():
        election = zk.Election(path, who)
        on_election(election)
        try:
            await asyncio.to_thread(election.run, lead)
        except KazooException as e:  # the session ended under the election: stand again
            log.warning("leader election at %s interrupted: %r", path, e)
        if not stopping.is_set():
            await asyncio.sleep(1.0)
