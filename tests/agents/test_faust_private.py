"""The start-up check names what a Faust upgrade moved, before any record is folded."""

from __future__ import annotations

import pytest

from streams.agents import faust_private
from streams.errors import TribunalError


def test_the_pinned_faust_has_everything_tribunal_reaches_into() -> None:
    faust_private.check()


def test_a_moved_member_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from faust.transport.drivers.aiokafka import Producer

    monkeypatch.delattr(Producer, "_trn_locks")
    with pytest.raises(TribunalError, match=r"Producer\._trn_locks"):
        faust_private.check()
