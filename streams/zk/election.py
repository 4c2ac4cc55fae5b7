"""A ZooKeeper session for a service, and standing for election in it until told to stop.

The bridge and the ticker each run one active process among their replicas: each replica stands
in its election (kazoo's Election recipe), the elected one works in `lead` (on a thread of
asyncio's pool: the recipe blocks), and when its session ends under the election it stands again
with the session kazoo makes next.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)


@asynccontextmanager
async def session(hosts: str, timeout: float, listener: Callable[[str], Any]) -> AsyncIterator[Any]:
    """A started kazoo client whose state changes go to `listener`; stopped and closed on the way out."""
    from streams.zk.client import client

    zk = client(hosts, timeout)
    zk.add_listener(listener)
    await asyncio.to_thread(zk.start, 30)
    try:
        yield zk
    finally:
        await asyncio.to_thread(zk.stop)
        zk.close()


def identifier() -> str:
    """Who stands: the host and thread, as the election's contenders list shows them."""
    return f"{socket.gethostname()}:{threading.get_native_id()}"


class Candidacy:
    """Standing in one election until `stop()`. `lead` steps down when `holding()` turns false: on
    `stop()`, or when the session is LOST (`on_state`, the session's listener), since another
    process may be elected then."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.session_lost = threading.Event()
        self.election: Any = None

    def on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            self.session_lost.set()

    def holding(self) -> bool:
        """Whether the leadership `lead` was given still holds."""
        return not self.stopping.is_set() and not self.session_lost.is_set()

    async def stand(self, zk: Any, path: str, lead: Callable[[], None]) -> None:
        """Stand in `path`'s election until stopped; `lead()` runs whenever this process is elected and
        returns when its leadership should end."""
        from kazoo.exceptions import KazooException

        await asyncio.to_thread(zk.ensure_path, path)
        who = identifier()

        def elected() -> None:
            self.session_lost.clear()  # a session of its own elected it
            lead()

        while not self.stopping.is_set():
            self.election = zk.Election(path, who)
            try:
                await asyncio.to_thread(self.election.run, elected)
            except KazooException as e:  # the session ended under the election: stand again
                log.warning("leader election at %s interrupted: %r", path, e)
            if not self.stopping.is_set():
                await asyncio.sleep(1.0)

    def stop(self) -> None:
        self.stopping.set()
        if self.election is not None:
            self.election.cancel()
