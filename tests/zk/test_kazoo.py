"""The ZooKeeper fixture is a real server: sessions, ephemeral nodes and watches behave as such."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

pytestmark = pytest.mark.integration


def test_ephemeral_node_vanishes_with_its_session_and_the_watch_fires(zookeeper: str, unique: str) -> None:
    observer, member = KazooClient(hosts=zookeeper), KazooClient(hosts=zookeeper)
    observer.start(timeout=30)
    member.start(timeout=30)
    try:
        path = f"/tribunal-test/{unique}/schedulers"
        observer.ensure_path(path)
        seen: list[list[str]] = []
        gone = threading.Event()

        @observer.ChildrenWatch(path)
        def _watch(children: list[str]) -> None:
            seen.append(sorted(children))
            if seen[-1] == [] and len(seen) > 1:
                gone.set()

        member.create(f"{path}/A", b"10.0.0.1:7000", ephemeral=True)
        assert observer.get(f"{path}/A")[0] == b"10.0.0.1:7000"
        member.stop()  # closing the session removes its ephemeral nodes
        assert gone.wait(30), seen
        assert ["A"] in seen and observer.get_children(path) == []
    finally:
        member.stop()
        member.close()
        observer.stop()
        observer.close()
