"""The intake fold: the seed's envelope in, AppMetrical or a dead letter out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.records import AppMetrical, DeadLetter
from streams.core import intake
from streams.core.outputs import DLQ
from streams.core.source import SourceRecord

CHANNEL = "plugin_decider"


def envelope(app: object = "ats", metrical: object = 90, command: str = "app-metrical",
             channel: str = CHANNEL) -> bytes:
    body = json.dumps({"App": app, "Metrical": metrical})
    return json.dumps({"Command": command, "Channel": channel, "Body": body}).encode()


def record(value: bytes | None, offset: int = 0, key: bytes | None = b"pool-a") -> SourceRecord:
    return SourceRecord(topic="plugin_decider", partition=1, offset=offset, timestamp=1_732_200_000_000,
                        key=key, value=value)


def test_seed_envelope_becomes_app_metrical_with_cause_and_seq() -> None:
    raw = b'{"Command":"app-metrical","Channel":"plugin_decider","Body":"{\\"App\\":\\"ats\\",\\"Metrical\\":90}"}'
    state, outputs = intake.apply(intake.IntakeState(), record(raw, offset=7), CHANNEL)
    [out] = outputs
    assert out.stream == intake.APP_METRICALS and out.key == "pool-a"
    assert out.record == AppMetrical(pool="pool-a", seq=1, channel=CHANNEL, app="ats", metrical=90,
                                     cause={"topic": "plugin_decider", "partition": 1, "offset": 7,
                                            "timestamp": 1_732_200_000_000})
    assert state == intake.IntakeState(metrics_seq=1, dead_seq=0, last_offset=7)


def test_absent_key_means_pool_default() -> None:
    _, [out] = intake.apply(intake.IntakeState(), record(envelope(), key=None), CHANNEL)
    assert out.key == "default" and out.record.pool == "default"  # type: ignore[attr-defined]


@pytest.mark.parametrize(("value", "key", "code"), [
    (b"not json", b"p", "bad_envelope"),
    (b'{"Channel":"plugin_decider","Body":"{}"}', b"p", "bad_envelope"),
    (None, b"p", "empty_value"),
    (envelope(command="app-restart"), b"p", "unknown_command"),
    (envelope(channel="plugin_justice"), b"p", "wrong_channel"),
    (json.dumps({"Command": "app-metrical", "Channel": CHANNEL, "Body": "{oops"}).encode(), b"p", "bad_body"),
    (envelope(metrical=101), b"p", "bad_metric"),
    (envelope(metrical=-0.5), b"p", "bad_metric"),
    (envelope(metrical="high"), b"p", "bad_metric"),
    (envelope(metrical=True), b"p", "bad_metric"),
    (envelope(app=""), b"p", "bad_metric"),
    (envelope(), b"\xff\xfe", "bad_key"),
])
def test_malformed_records_become_dead_letters_with_reason(value: bytes | None, key: bytes, code: str) -> None:
    state, [out] = intake.apply(intake.IntakeState(), record(value, key=key, offset=3), CHANNEL)
    assert out.stream == DLQ
    letter = out.record
    assert isinstance(letter, DeadLetter)
    assert letter.reason_code == code and letter.reason
    assert letter.cause.offset == 3 and letter.seq == 1
    assert state.dead_seq == 1 and state.metrics_seq == 0


def test_dead_letter_keeps_original_bytes() -> None:
    import base64

    raw = b"\x00\x01 binary"
    _, [out] = intake.apply(intake.IntakeState(), record(raw), CHANNEL)
    assert base64.b64decode(out.record.original_value_b64) == raw  # type: ignore[attr-defined]


def test_redelivered_offset_yields_nothing() -> None:
    state, _ = intake.apply(intake.IntakeState(), record(envelope(), offset=5), CHANNEL)
    again, outputs = intake.apply(state, record(envelope(), offset=5), CHANNEL)
    assert outputs == [] and again == state


@given(st.lists(st.one_of(st.binary(max_size=64), st.builds(
    envelope, app=st.text(max_size=8), metrical=st.one_of(st.floats(allow_nan=True), st.integers(-5, 105))
)), max_size=30))
def test_every_record_yields_exactly_one_output_and_seqs_have_no_gaps(values: list[bytes]) -> None:
    state = intake.IntakeState()
    seqs: dict[str, list[int]] = {intake.APP_METRICALS: [], DLQ: []}
    for offset, value in enumerate(values):
        state, outputs = intake.apply(state, record(value, offset=offset), CHANNEL)
        assert len(outputs) == 1
        seqs[outputs[0].stream].append(outputs[0].record.seq)  # type: ignore[attr-defined]
    for numbers in seqs.values():
        assert numbers == list(range(1, len(numbers) + 1))


@given(st.lists(st.binary(max_size=40), max_size=20))
def test_same_input_same_output_bytes(values: list[bytes]) -> None:
    def run() -> list[bytes]:
        state, out = intake.IntakeState(), []
        for offset, value in enumerate(values):
            state, outputs = intake.apply(state, record(value, offset=offset), CHANNEL)
            out += [o.value_bytes() for o in outputs]
        return out

    assert run() == run()
