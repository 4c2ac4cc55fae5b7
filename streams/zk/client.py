"""Every kazoo client tribunal makes, made here (as `streams.kafka` makes every Kafka client): one place for
who a client is to ZooKeeper and what the nodes it creates allow.

With `TRIBUNAL_ZOOKEEPER_AUTH=user:password` a client authenticates by digest and every node it creates
(groups, scheduler registrations, assignments, elections) gets that user's full rights and read-only for
everyone else, as Kafka itself sets its nodes under `zookeeper.set.acl`: another client can watch a group
but cannot delete a scheduler's node or move a job. Without it nodes stay open, as ZooKeeper makes them.
"""

from __future__ import annotations

from typing import Any

from streams.errors import ConfigError
from streams.settings import Settings


def client(hosts: str, timeout: float = 10.0, settings: Settings | None = None) -> Any:
    """A kazoo client (not started) for `hosts`, with the identity `settings` give (default: the environment's)."""
    from kazoo.client import KazooClient

    s = settings if settings is not None else Settings()
    if s.zookeeper_auth is None:
        return KazooClient(hosts=hosts, timeout=timeout)
    credential = s.zookeeper_auth.get_secret_value()
    user, colon, password = credential.partition(":")
    if not colon or not user:
        raise ConfigError("TRIBUNAL_ZOOKEEPER_AUTH must be 'user:password'")
    return KazooClient(hosts=hosts, timeout=timeout, auth_data=[("digest", credential)],
                       default_acl=node_acl(user, password))


def node_acl(user: str, password: str) -> list[Any]:
    """All rights for `user`, reading for anyone."""
    from kazoo.security import make_acl, make_digest_acl

    return [make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)]
