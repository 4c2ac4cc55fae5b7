"""The event stream's pieces without a broker: its cursor, its wire format read back by the client's parser, and a
quiet stream's keep-alives, which close cleanly whichever of them is waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.dispatcher.api import _with_keepalive
from streams.dispatcher.events import BadCursor, Cursor, Event, sse
from streams.dispatcher.http_client import _events

offsets = st.integers(0, 10**18)


@given(st.integers(0, 999), offsets, st.integers(0, 999), offsets)
def test_a_cursor_reads_back_as_written(sp: int, s: int, op: int, o: int) -> None:
    cursor = Cursor(sp, s, op, o)
    assert Cursor.parse(str(cursor)) == cursor


@pytest.mark.parametrize("text", ["", "1:2:3", "1:2:3:x", "-1:2:3:4", "1:2:3:4:5", "1:2:3:4\nid: 9"])
def test_what_is_no_cursor_is_refused(text: str) -> None:
    with pytest.raises(BadCursor):
        Cursor.parse(text)


class _Lines:
    """A response body as aiohttp's reader hands it over: one line at a time."""

    def __init__(self, raw: bytes) -> None:
        self.lines = raw.splitlines(keepends=True)

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> bytes:
        if not self.lines:
            raise StopAsyncIteration
        return self.lines.pop(0)


@given(st.lists(st.tuples(st.sampled_from(["ready", "JobStarted", "JobFailedFinally"]),
                          st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3)), max_size=5))
def test_the_clients_parser_reads_what_the_api_writes(sent: list[tuple[str, dict[str, str]]]) -> None:
    import json

    raw = b": keep-alive\n\n".join(sse(Event(kind, Cursor(1, i, 2, i * 2), data)) for i, (kind, data) in
                                    enumerate(sent))

    async def read() -> list[tuple[str, str, str]]:
        return [event async for event in _events(_Lines(raw))]

    got = asyncio.run(read())
    assert [(kind, ident, json.loads(data)) for kind, ident, data in got] == [
        (kind, f"1:{i}:2:{i * 2}", data) for i, (kind, data) in enumerate(sent)]


def test_a_quiet_stream_is_kept_alive_and_closes_while_its_read_waits() -> None:
    closed: list[str] = []

    async def quiet() -> AsyncIterator[str]:
        try:
            yield "first"
            await asyncio.sleep(3600)  # nothing more for an hour
            yield "never"
        finally:
            closed.append("stream")

    async def follow() -> list[str | None]:
        stream = quiet()
        paced = _with_keepalive(stream, 0.05)
        seen = [await paced.__anext__(), await paced.__anext__(), await paced.__anext__()]
        await paced.aclose()  # its read of the stream waits: ended first, so the stream closes cleanly
        await stream.aclose()
        return seen

    assert asyncio.run(asyncio.wait_for(follow(), 10)) == ["first", None, None]
    assert closed == ["stream"]
