"""The ZooKeeper fixture is a real server: sessions, ephemeral nodes and watches behave as such."""

from __future__ import annotations

import threading

from kazoo.client import KazooClient


def test_ephemeral_node_vanishes_with_its_session_and_the_watch_fires(zookeeper: str, unique: str) -> None:
    observer, member = KazooClient(hosts=zookeeper), KazooClient(hosts=zookeeper)
    observer.start(timeout=30)
    member.start(timeout=30)
    try:
        path = f"/tribunal-test/{unique}/schedulers"
        observer.ensure_path(path)
        seen: list[list[str]] = []
        there, gone = threading.Event(), threading.Event()

        @observer.ChildrenWatch(path)
        def _watch(children: list[str]) -> None:
            seen.append(sorted(children))
            if seen[-1] == ["A"]:
                there.set()
            if seen[-1] == [] and there.is_set():
                gone.set()

        member.create(f"{path}/A", b"10.0.0.1:7000", ephemeral=True)
        assert observer.get(f"{path}/A")[0] == b"10.0.0.1:7000"
        # A watch is re-set after it fires: a change made before that is seen only as the state
        # read then. So the session ends only once the watch has shown the node.
        assert there.wait(30), seen
        member.stop()  # closing the session removes its ephemeral nodes
        assert gone.wait(30), seen
        assert ["A"] in seen and observer.get_children(path) == []
    finally:
        member.stop()
        member.close()
        observer.stop()
        observer.close()
