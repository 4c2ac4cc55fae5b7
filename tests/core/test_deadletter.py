"""Dead letters fit in one Kafka record whatever they reject (found by tests/worker/test_fuzz.py)."""

from __future__ import annotations

import base64
import json

from hypothesis import example, given
from hypothesis import strategies as st

from schemas.records import DeadLetter
from streams.core.deadletter import KEPT_BYTES, REASON_CHARS, Rejected, dead_letter
from streams.core.outputs import Emit
from streams.core.source import SourceRecord

ONE_RECORD = 1024 * 1024  # the broker's default largest record


def letter(key: bytes | None, value: bytes | None, reason: str = "bad") -> tuple[DeadLetter, bytes]:
    record = SourceRecord("plugin_decider", 0, 7, 1_000, key, value)
    made = dead_letter(record, "pool-a", 1, Rejected("bad_envelope", reason), 1)
    return made, Emit("dlq", "pool-a", made).value_bytes()


def test_a_small_record_is_kept_whole_as_bytes_and_text() -> None:
    made, _ = letter(b"pool-a", b'{"oops"')
    assert made.kept and made.original_value == '{"oops"' and made.original_bytes == 7
    assert base64.b64decode(made.original_value_b64 or "") == b'{"oops"'


def test_a_megabyte_record_leaves_only_its_size_and_its_cause() -> None:
    made, encoded = letter(b"pool-a", b"x" * 1_000_000)
    assert not made.kept and made.original_value_b64 is None and made.original_value is None
    assert made.original_bytes == 1_000_000 and (made.cause.topic, made.cause.offset) == ("plugin_decider", 7)
    assert len(encoded) < KEPT_BYTES


def test_text_that_escapes_large_is_dropped_before_the_bytes() -> None:
    control = b"\x01" * 60_000  # 6 bytes each as JSON text, 1.33 as base64
    made, encoded = letter(b"pool-a", control)
    assert made.kept and made.original_value is None and base64.b64decode(made.original_value_b64 or "") == control
    assert len(encoded) <= KEPT_BYTES + 1_000


def test_a_long_reason_is_shortened_and_says_so() -> None:
    made, _ = letter(b"pool-a", b"{}", reason="unknown Command " + "x" * 1_000_000)
    assert len(made.reason) < REASON_CHARS + 50 and made.reason.endswith("(1000016 characters)")


@given(st.binary(max_size=ONE_RECORD // 4), st.binary(max_size=ONE_RECORD - ONE_RECORD // 4),
       st.text(max_size=5_000))
@example(b"k", b"v" * (KEPT_BYTES * 3 // 4 - 4), "at the cap")
@example(b"k", b"v" * (KEPT_BYTES * 3 // 4 + 4), "just past it")
@example(b"k" * (ONE_RECORD // 4), b"v", "a large key")
def test_every_dead_letter_fits_in_one_record(key: bytes, value: bytes, reason: str) -> None:
    made, encoded = letter(key, value, reason)
    assert len(encoded) < ONE_RECORD // 2
    assert DeadLetter.model_validate(json.loads(encoded)) == made


def test_a_large_key_with_a_small_value_is_not_kept_but_says_so() -> None:
    made, encoded = letter(b"k" * 300_000, b"{}")
    assert not made.kept and made.original_key_b64 is None and made.original_bytes == 2
    assert len(encoded) < KEPT_BYTES
