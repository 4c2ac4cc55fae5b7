"""ZooKeeper digest auth: nodes a tribunal client creates are readable by anyone and changed only by it."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from streams.errors import ConfigError
from streams.settings import Settings
from streams.zk.client import client

pytestmark = pytest.mark.integration


def test_nodes_made_with_auth_are_read_by_all_and_changed_by_none_other(zookeeper: str, unique: str) -> None:
    from kazoo.exceptions import NoAuthError

    own = client(zookeeper, settings=Settings(zookeeper_auth=SecretStr("tribunal:s3cret")))
    stranger, impostor = client(zookeeper, settings=Settings()), client(
        zookeeper, settings=Settings(zookeeper_auth=SecretStr("tribunal:guess")))
    for zk in (own, stranger, impostor):
        zk.start(timeout=30)
    try:
        own.create(f"/{unique}/g/schedulers/A", b"A:7000", makepath=True)  # every node on the way: the same ACL
        assert stranger.get(f"/{unique}/g/schedulers/A")[0] == b"A:7000"
        for zk in (stranger, impostor):
            with pytest.raises(NoAuthError):
                zk.delete(f"/{unique}/g/schedulers/A")
            with pytest.raises(NoAuthError):
                zk.create(f"/{unique}/g/schedulers/B")
            with pytest.raises(NoAuthError):
                zk.delete(f"/{unique}", recursive=True)
        own.delete(f"/{unique}", recursive=True)
    finally:
        for zk in (own, stranger, impostor):
            zk.stop()
            zk.close()


def test_without_auth_nodes_stay_open(zookeeper: str, unique: str) -> None:
    own, other = client(zookeeper, settings=Settings()), client(zookeeper, settings=Settings())
    for zk in (own, other):
        zk.start(timeout=30)
    try:
        own.create(f"/{unique}/x", makepath=True)
        other.delete(f"/{unique}", recursive=True)
        assert own.exists(f"/{unique}") is None
    finally:
        for zk in (own, other):
            zk.stop()
            zk.close()


def test_auth_must_name_a_user() -> None:
    with pytest.raises(ConfigError, match="user:password"):
        client("127.0.0.1:1", settings=Settings(zookeeper_auth=SecretStr("no-colon")))
