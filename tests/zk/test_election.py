"""What an elected process may do as its session's state changes (issue 48): it acts only while connected, keeps
its leadership through a suspension, and gives it up when the session is lost. Kazoo's states fed by hand: the
live partition tests (the actuator's, the shard nodes') make them happen for real."""

from __future__ import annotations

import threading
import time

from kazoo.protocol.states import KazooState

from streams.zk.election import Candidacy


def test_a_leader_acts_only_while_connected_and_keeps_its_leadership_until_the_session_is_lost() -> None:
    candidacy, acting, resumed = Candidacy(), threading.Event(), []
    follower = threading.Thread(target=candidacy.follow, args=(acting, "testing", lambda: resumed.append(1)))
    follower.start()

    def settles(want: bool) -> bool:
        deadline = time.monotonic() + 2
        while acting.is_set() != want and time.monotonic() < deadline:
            time.sleep(0.005)
        return acting.is_set() == want

    try:
        assert settles(True) and resumed == [1]
        candidacy.on_state(KazooState.SUSPENDED)  # a partition: stop acting at once, the leadership kept
        assert settles(False) and follower.is_alive() and candidacy.holding()
        candidacy.on_state(KazooState.CONNECTED)  # back within the session: still elected, acting again
        assert settles(True) and resumed == [1, 1]
        candidacy.on_state(KazooState.SUSPENDED)
        assert settles(False)
        candidacy.on_state(KazooState.LOST)  # expired meanwhile: another may lead; this one steps down
        follower.join(2)
        assert not follower.is_alive() and not acting.is_set() and not candidacy.holding()
    finally:
        candidacy.stop()
        follower.join(2)
