"""The bridge's snapshot of a group, read from a real ZooKeeper server."""

from __future__ import annotations

from streams.groups.bridge import Bridge
from streams.settings import Settings
from streams.zk.layout import Layout, registration


def test_an_owner_node_without_data_is_published_as_unowned_never_as_empty(zookeeper: str, unique: str) -> None:
    from kazoo.client import KazooClient

    layout = Layout(f"/{unique}")
    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=30)
    try:
        layout.ensure(zk, "g")
        zk.create(layout.node("g", "schedulers", "A"), registration("A:7000", 1, 10))
        for job in ("j1", "j2", "j3"):
            zk.create(layout.node("g", "jobs", job))
        zk.create(layout.node("g", "owners", "j1"), b"")
        zk.create(layout.node("g", "owners", "j2"), b"A")
        zk.create(layout.node("g", "owners", "j3"), b"  \n")
        snapshot = Bridge(Settings(), layout).snapshot(zk, "g")
    finally:
        zk.stop()
        zk.close()
    assert snapshot["jobs"] == {"j1": None, "j2": "A", "j3": None}
    assert [s["scheduler"] for s in snapshot["schedulers"]] == ["A"]
