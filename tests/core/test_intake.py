"""Reading the seed's envelope: every way a metric record can be malformed ends as a dead letter."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.records import DeadLetter
from streams.core import pools
from streams.core.intake import parse
from streams.core.outputs import DLQ
from streams.core.source import SourceRecord
from tests.core.pools.builders import Log, seed_policy

CHANNEL = "plugin_decider"


def envelope(app: object = "ats", metrical: object = 90, command: str = "app-metrical",
             channel: str = CHANNEL) -> bytes:
    body = json.dumps({"App": app, "Metrical": metrical})
    return json.dumps({"Command": command, "Channel": channel, "Body": body}).encode()


def record(value: bytes | None, offset: int = 0, key: bytes | None = b"pool-a") -> SourceRecord:
    return SourceRecord(topic="plugin_decider", partition=1, offset=offset, timestamp=1_732_200_000_000,
                        key=key, value=value)


def test_the_seeds_envelope_reads_as_app_and_metrical() -> None:
    raw = b'{"Command":"app-metrical","Channel":"plugin_decider","Body":"{\\"App\\":\\"Ats\\",\\"Metrical\\":90}"}'
    assert parse(record(raw), CHANNEL) == ("Ats", 90.0)


def started() -> Log:
    log = Log()
    log.policy(seed_policy())
    return log


@pytest.mark.parametrize(("value", "key", "code"), [
    (b"not json", b"pool-a", "bad_envelope"),
    (b'{"Channel":"plugin_decider","Body":"{}"}', b"pool-a", "bad_envelope"),
    (None, b"pool-a", "empty_value"),
    (envelope(command="app-restart"), b"pool-a", "unknown_command"),
    (envelope(channel="plugin_justice"), b"pool-a", "wrong_channel"),
    (json.dumps({"Command": "app-metrical", "Channel": CHANNEL, "Body": "{oops"}).encode(), b"pool-a", "bad_body"),
    (envelope(metrical=101), b"pool-a", "bad_metric"),
    (envelope(metrical=-0.5), b"pool-a", "bad_metric"),
    (envelope(metrical="high"), b"pool-a", "bad_metric"),
    (envelope(metrical=True), b"pool-a", "bad_metric"),
    (envelope(app=""), b"pool-a", "bad_metric"),
    (envelope(), b"\xff\xfe", "bad_key"),
    (envelope(app="mysql"), b"pool-a", "unknown_app"),
    (envelope(), b"pool-without-policy", "no_policy"),
])
def test_malformed_records_become_dead_letters_with_reason(value: bytes | None, key: bytes, code: str) -> None:
    log = Log(key) if code == "no_policy" else started()
    log.key = key
    [out] = log.feed(pools.PLUGIN_DECIDER, value)  # type: ignore[arg-type]
    assert out.stream == DLQ
    letter = DeadLetter.model_validate_json(out.value_bytes())
    assert letter.reason_code == code and letter.reason
    assert letter.cause.offset == 0 and letter.seq == 1
    if value is not None:
        assert base64.b64decode(letter.original_value_b64 or "") == value


def test_redelivered_offset_yields_nothing() -> None:
    log = started()
    state = log.state
    first, outputs = pools.apply(state, record(envelope(), offset=5), CHANNEL)
    again, repeated = pools.apply(first, record(envelope(), offset=5), CHANNEL)
    assert [o.stream for o in outputs] == ["scaling-decisions", *["pool-instances"] * 2]
    assert repeated == [] and again == first


@given(st.lists(st.one_of(st.binary(max_size=64), st.builds(
    envelope, app=st.sampled_from(["ats", "HADOOP", "mysql", ""]),
    metrical=st.one_of(st.floats(allow_nan=True), st.integers(-5, 105)))), max_size=30))
def test_every_record_yields_exactly_one_output_and_seqs_have_no_gaps(values: list[bytes]) -> None:
    log = started()
    seqs: dict[str, list[int]] = {pools.SCALING_DECISIONS: [1], DLQ: []}
    for value in values:
        [out] = log.feed(pools.PLUGIN_DECIDER, value)
        seqs[out.stream].append(json.loads(out.value_bytes())["seq"])
    for numbers in seqs.values():
        assert numbers == list(range(1, len(numbers) + 1))
