"""The export-line format: one record a JSON line (`tribunal audit export` writes inputs so, `replay` reads them and
writes its outputs so; `what-if` and the tests read them).

A line is `{"topic", "partition", "offset", "timestamp", "key", "value"}`: `value` is the record's JSON
value, or `value_b64` carries its exact bytes (a value that is not compact JSON, e.g. a malformed record),
and `key_b64` a key that is not UTF-8. A null key is pool `default`.

The raw form (`export --raw`, `raw_line`) is read beside it, line by line: `[topic, partition, offset, timestamp,
key]`, a tab, and the value's bytes as they are. Its reader parses the head alone (all a replay on several
processes routes by) and takes the value without parsing or re-encoding it, which in the JSON form costs more
than the rest of reading a line.
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any, BinaryIO, NamedTuple

import orjson

from streams.core.source import SourceRecord
from streams.errors import ConfigError


class ReplayInputError(ConfigError):
    """A line of the replay file is not a record line."""


def encode_value(value: Any) -> bytes:
    """Compact JSON, as the seed's Go producers and tribunal itself write records."""
    return orjson.dumps(value)


def export_row(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
               value: bytes | None) -> dict[str, Any]:
    """A record as a replay-file line: readable `key` and `value`, plus `key_b64` / `value_b64` unless they
    re-encode exactly."""
    row: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset, "timestamp": timestamp,
                           "key": None if key is None else key.decode("utf-8", "replace"), "value": None}
    if key is not None and row["key"].encode("utf-8") != key:
        row["key_b64"] = base64.b64encode(key).decode("ascii")  # not UTF-8: the text alone would change it
    if value is not None:
        try:
            row["value"] = orjson.loads(value)
            exact = encode_value(row["value"]) == value
        except ValueError:
            row["value"], exact = value.decode("utf-8", "replace"), False
        if not exact:
            row["value_b64"] = base64.b64encode(value).decode("ascii")
    return row


def export_line(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
                value: bytes | None) -> bytes:
    """A record as a line of the JSON form (`export_row`), newline included."""
    return orjson.dumps(export_row(topic, partition, offset, timestamp, key, value)) + b"\n"


def raw_line(topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
             value: bytes | None) -> bytes:
    """A record as a line of the raw form, newline included. The value goes as it is where a line can carry it
    (UTF-8 without a line break of any kind, so the line also survives being read as text and split by
    `str.splitlines`, as the head does: `_HEAD_BREAKS`); otherwise the head gains a sixth element that says how:
    `{"value_b64": true}` (the part after the tab is its base64) or `{"value": null}`; and `{"key_b64": ...}` for
    a key that is not UTF-8, as in the JSON form."""
    text = None if key is None else key.decode("utf-8", "replace")
    head: list[Any] = [topic, partition, offset, timestamp, text]
    odd: dict[str, Any] = {}
    if key is not None and text is not None and text.encode("utf-8") != key:
        odd["key_b64"] = base64.b64encode(key).decode("ascii")
    if value is None:
        odd["value"], body = None, b""
    elif _one_line(value):
        body = value
    else:
        odd["value_b64"], body = True, base64.b64encode(value)
    if odd:
        head.append(odd)
    encoded = orjson.dumps(head)
    for character, escaped in _HEAD_BREAKS:
        if character in encoded:
            encoded = encoded.replace(character, escaped)
    return encoded + b"\t" + body + b"\n"


# The line breaks of `str.splitlines` that orjson leaves unescaped in a string (it escapes those below U+0020):
# in UTF-8 these bytes are always these characters, and only strings in JSON hold them.
_HEAD_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))
_ODD = frozenset({"key_b64", "value_b64", "value"})  # what a raw line's sixth head element may say


def _one_line(value: bytes) -> bool:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not text or text.splitlines() == [text]


RawRow = tuple[list[Any], bytes, int]
"""A raw-form line split (what `record_in` reads): its head parsed, the line, and where its tab is (the value,
after it, is cut out only for a record built). A plain tuple: JSON parses to none, and a named one costs more
to make than the rest of routing a line."""


def _raw_row(line: bytes | str, number: int) -> RawRow:
    data = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    tab = data.find(b"\t")
    try:
        if tab < 0:
            raise ValueError("a raw record line has a tab after its head")
        return orjson.loads(data[:tab]), data, tab
    except ValueError as e:
        raise _not_a_record(number, e) from None


def _raw_record(row: RawRow) -> SourceRecord:
    """The source record of a raw-form line (`ValueError`, `TypeError` if the head describes none)."""
    head, data, tab = row
    body = data[tab + 1:]
    if body[-1:] == b"\n":  # a plain value holds no line break, so one at the end is the line's (\n or \r\n)
        body = body[:-2] if body[-2:-1] == b"\r" else body[:-1]
    if type(head) is not list:
        raise TypeError("a raw record line's head is a JSON array")
    if len(head) == 5:
        topic, partition, offset, timestamp, name = head
        odd: dict[str, Any] = {}
    else:
        topic, partition, offset, timestamp, name, odd = head
        if type(odd) is not dict or not odd.keys() <= _ODD:
            raise TypeError(f"a raw record line's sixth head element is an object of {sorted(_ODD)}")
    if type(topic) is not str or type(partition) is not int or type(offset) is not int or type(timestamp) is not int:
        raise TypeError("a raw record line's head is [topic, partition, offset, timestamp, key]")
    if odd:
        if name is not None and type(name) is not str:
            raise TypeError("a raw record line's key is a string or null")
        if "key_b64" in odd:
            key: bytes | None = base64.b64decode(odd["key_b64"], validate=True)
        else:
            key = None if name is None else name.encode("utf-8")
        if "value" in odd:
            if odd["value"] is not None or body:
                raise ValueError("a raw record line's value is null only with nothing after its tab")
            return SourceRecord(topic, partition, offset, timestamp, key, None)
        return SourceRecord(topic, partition, offset, timestamp, key,
                            base64.b64decode(body, validate=True) if odd.get("value_b64") else body)
    if type(name) is str:
        return SourceRecord(topic, partition, offset, timestamp, name.encode("utf-8"), body)
    if name is None:
        return SourceRecord(topic, partition, offset, timestamp, None, body)
    raise TypeError("a raw record line's key is a string or null")


def record_of(row: dict[str, Any]) -> SourceRecord:
    """The source record a file line describes (exact bytes from `key_b64` / `value_b64` when present)."""
    if "value_b64" in row:
        value: bytes | None = base64.b64decode(row["value_b64"])
    else:
        text = row.get("value")
        value = None if text is None else orjson.dumps(text)  # `encode_value`, without a call per record
    if "key_b64" in row:
        key: bytes | None = base64.b64decode(row["key_b64"])
    else:
        name = row.get("key")
        key = None if name is None else (name if type(name) is str else str(name)).encode("utf-8")
    return SourceRecord(str(row["topic"]), int(row.get("partition", 0)), int(row["offset"]),
                        int(row.get("timestamp", 0)), key, value)  # positional: a named tuple's keywords are slow


def records_of(lines: Iterable[bytes | str]) -> Iterator[SourceRecord]:
    """The source records of a replay file's lines (blank lines skipped)."""
    for number, line in enumerate(lines, 1):
        record = read_line(line, number)
        if record is not None:
            yield record


def read_line(line: bytes | str, number: int) -> SourceRecord | None:
    """The source record of a replay file's line `number`; None for a blank line; `ReplayInputError` for a line
    that is no record line."""
    row = row_of(line, number)
    return None if row is BLANK else record_in(row, number)


RAW_START = (b"[", "[")  # a raw-form line starts its head so; a JSON form's line is an object
BLANK = object()  # what `row_of` answers for a blank line (a line `null` is no record line, not a blank one)


def row_of(line: bytes | str, number: int) -> Any:
    """Line `number` parsed (what `record_in` reads): a JSON value, or a `RawRow` for a line of the raw form;
    `BLANK` for a blank line; `ReplayInputError` if it is neither."""
    if line[:1] in RAW_START:
        return _raw_row(line, number)
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as e:
        if not line.strip():  # blank: checked only here, as a line that parses is not blank
            return BLANK
        raise _not_a_record(number, e) from None


def record_in(row: Any, number: int) -> SourceRecord:
    """The source record of line `number`, parsed (`row_of`); `ReplayInputError` if it describes none."""
    if type(row) is tuple:  # RawRow
        try:
            return _raw_record(row)
        except (ValueError, TypeError) as e:
            raise _not_a_record(number, e) from None
    if not isinstance(row, dict):
        raise _not_a_record(number, TypeError(f"a record line is a JSON object, not {type(row).__name__}"))
    try:
        return record_of(row)
    except (ValueError, KeyError, TypeError) as e:
        raise _not_a_record(number, e) from None


def _not_a_record(number: int, error: Exception) -> ReplayInputError:
    return ReplayInputError(f"line {number} is not a record line ({type(error).__name__}: {error})")


class Output(NamedTuple):
    """A derived output record. `offset`: its place among the outputs of its topic and partition so far
    (a replay has no broker to assign one)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str
    value: bytes


def output_line(out: Output) -> bytes:
    """One output line (no newline); the record's own canonical bytes are embedded unchanged."""
    return b'{"topic":%s,"partition":%d,"offset":%d,"timestamp":%d,"key":%s,"value":%s}' % (
        _json_text(out.topic), out.partition, out.offset, out.timestamp, _json_text(out.key), out.value)


@lru_cache(maxsize=1 << 14)
def _json_text(text: str) -> bytes:
    """A topic or key as JSON (there are few of them, and every output line names two)."""
    return orjson.dumps(text)


@lru_cache(maxsize=1 << 12)
def line_head(topic: str, partition: int) -> bytes:
    """An output line up to its offset: `output_line` is `line_head + offset + line_tail` (less the newline).

    The same bytes object for every output of a topic and partition, so it can key their offset count,
    and it crosses a process boundary once per message (pickle keeps one copy of a repeated object)."""
    return b'{"topic":%s,"partition":%d,"offset":' % (_json_text(topic), partition)


def line_tail(timestamp: int, key: str, value: bytes) -> bytes:
    """An output line after its offset, newline included: a replay process encodes it, the merge only
    numbers the line (the offset counts the outputs of all keys together, which only the merge sees)."""
    return b',"timestamp":%d,"key":%s,"value":%s}\n' % (timestamp, _json_text(key), value)


class LineWriter:
    """Writes lines in large blocks on a thread of its own: the write itself runs without the GIL,
    beside the merge (a million decisions are close to a gigabyte)."""

    BLOCK = 2_000  # lines per write
    AHEAD = 4  # blocks queued before the writer waits for the oldest

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._lines: list[bytes] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-writer")
        self._queued: deque[Future[int]] = deque()

    def write(self, line: bytes) -> None:
        self._lines.append(line)
        if len(self._lines) >= self.BLOCK:
            self._hand_over()

    def write_block(self, block: bytes) -> None:
        """Whole lines at once, newlines included (after the lines written before)."""
        self._hand_over()
        self._queued.append(self._pool.submit(self._sink.write, block))
        while len(self._queued) > self.AHEAD:
            self._queued.popleft().result()

    def _hand_over(self) -> None:
        if self._lines:
            lines, self._lines = self._lines, []
            lines.append(b"")
            self._queued.append(self._pool.submit(self._sink.write, b"\n".join(lines)))
        while len(self._queued) > self.AHEAD:
            self._queued.popleft().result()

    def close(self) -> None:
        """Write what is left and wait for it; the sink stays open (its owner closes it)."""
        self._hand_over()
        while self._queued:
            self._queued.popleft().result()
        self._pool.shutdown()
        self._sink.flush()

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
