"""A ZooKeeper session for a service, and standing for election in it until told to stop.

The bridge and the ticker each run one active process among their replicas: each replica stands
in its election (kazoo's Election recipe), the elected one works in `lead` (on a thread of
asyncio's pool: the recipe blocks), and when its session ends under the election it stands again
with the session kazoo makes next.
"""

from __future__ import annotations

import asyncio
import logging
import os
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


def process_name() -> str:
    """This process, as the records of an elected one name it: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class SessionState:
    """What kazoo's listener says of a process's ZooKeeper session, kept where any thread can ask: `connected`
    (cleared while SUSPENDED: a partition, or a server that stops answering), `session_lost` (LOST: its ephemeral
    nodes are gone), and `changed` (set at every change: a waiter wakes). A process acts on what it holds only
    while connected; see `Candidacy` for why suspension, not loss, is the moment to stop."""

    def __init__(self) -> None:
        self.session_lost = threading.Event()
        self.connected = threading.Event()
        self.connected.set()
        self.changed = threading.Event()

    def on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            self.session_lost.set()
            self.connected.clear()
        elif state == KazooState.SUSPENDED:
            self.connected.clear()
        else:
            self.connected.set()
        self.changed.set()


class Candidacy(SessionState):
    """Standing in one election until `stop()`. The elected process keeps its leadership while `holding()`: until
    `stop()`, or until its session is LOST (another process may be elected then). It *acts* only while `acting()`:
    holding, and its session connected.

    Why both: a partition suspends the session, it does not end it; kazoo says LOST only once it reaches a server
    again, and until then the process would go on acting while the server expires its session and elects another
    (two leaders). Kazoo suspends the session when no answer came for two thirds of the session timeout (its read
    timeout); the server expires it no sooner than a whole session timeout after it last heard from the client. So
    the elected process stops acting at most two thirds of the session timeout after its last answer, before
    another can be elected; reconnected within the session it is still elected (its election node is the
    session's) and acts again, on what it reads then."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = threading.Event()
        self.election: Any = None

    def holding(self) -> bool:
        """Whether the leadership `lead` was given still holds."""
        return not self.stopping.is_set() and not self.session_lost.is_set()

    def acting(self) -> bool:
        """Whether the leader may act now: it holds the leadership and its session is connected."""
        return self.holding() and self.connected.is_set()

    def follow(self, acting: threading.Event, what: str, resumed: Callable[[], object] | None = None) -> None:
        """For a `lead`: keep `acting` set exactly while this candidacy acts (`resumed` called each time it is set);
        return when it no longer holds."""
        first = True
        while self.holding():
            self.changed.clear()
            now = self.acting()
            if now != acting.is_set():
                if now:
                    if first:
                        first = False
                    else:
                        log.info("ZooKeeper connection back within the session: %s again", what)
                    acting.set()
                    if resumed is not None:
                        resumed()
                else:
                    log.warning("ZooKeeper connection suspended: not %s until it is back (the session may be "
                                "expiring)", what)
                    acting.clear()
            self.changed.wait(0.2)
        acting.clear()

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
        self.changed.set()
        if self.election is not None:
            self.election.cancel()
