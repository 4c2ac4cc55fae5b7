"""The part of Faust's public surface the worker uses, as Protocols.

The worker's modules are typed against these rather than against `faust.App` (whose abstract
types span hundreds of members), so mypy checks a Faust upgrade against exactly what tribunal
touches, and tests can hand the worker's classes something small of their own. Faust's private
internals are not here: `streams.worker.faust_private` holds every touch of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from faust.types.tuples import TP


class Message(Protocol):
    """A record as Faust delivers it."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> float: ...  # seconds
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Any: ...


class Event(Protocol):
    """What an agent's `stream.events()` yields."""

    @property
    def message(self) -> Message: ...


class Consumer(Protocol):
    async def commit(self) -> bool: ...
    async def seek_wait(self, partitions: Mapping[TP, int]) -> None: ...
    def assignment(self) -> set[TP]: ...


class Conf(Protocol):
    @property
    def id(self) -> str: ...


class Assignor(Protocol):
    def group_for_topic(self, topic: str) -> int: ...


class App(Protocol):
    """The application, as the checkpoint, the continuity guard and the watchdog see it."""

    @property
    def conf(self) -> Conf: ...
    @property
    def consumer(self) -> Consumer: ...
    @property
    def producer(self) -> Any: ...  # reached only through `faust_private`
    @property
    def assignor(self) -> Assignor: ...
    @property
    def consumer_generation_id(self) -> int: ...
    @property
    def in_transaction(self) -> bool: ...
    @property
    def in_recovery(self) -> bool: ...
    @property
    def rebalancing(self) -> bool: ...
    @property
    def should_stop(self) -> bool: ...
