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


scalars = st.none() | st.booleans() | st.integers(-10, 200) | st.floats(-10, 200) | st.text(max_size=8)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


@given(st.one_of(st.text(max_size=6), st.none(), st.integers(0, 5)),
       st.one_of(st.integers(-5, 105), st.floats(-5, 105, allow_nan=False), st.booleans(), st.none(),
                 st.text(max_size=5), json_values),
       st.sampled_from(["app-metrical", "other", ""]), st.sampled_from([CHANNEL, "plugin_justice"]),
       st.dictionaries(st.sampled_from(["Extra", "App", "Metrical", "Body"]), json_values, max_size=2),
       st.booleans())
def test_the_plain_reading_accepts_only_what_the_models_accept_and_reads_it_alike(
        app: object, metrical: object, command: str, channel: str, extra: dict[str, object],
        duplicated: bool) -> None:
    """`intake._plain` reads a well-formed metric without the models: whatever it reads, the models read the
    same (app, metrical); whatever it leaves, the models decide. Duplicate keys, extra fields, booleans,
    strings, bounds and nesting included."""
    from schemas.envelope import CommandEnvelope, MetricBody
    from streams.core.intake import _plain
    body = json.dumps({**extra, "App": app, "Metrical": metrical})
    if duplicated:  # a key twice: both readers take the last
        body = body[:-1] + ', "Metrical": 50}'
    value = json.dumps({"Command": command, "Channel": channel, "Body": body, **extra}).encode()
    plain = _plain(value, CHANNEL)
    try:
        outer = CommandEnvelope.model_validate_json(value)
        inner = MetricBody.model_validate_json(outer.Body)
        modelled: tuple[str, float] | None = (inner.App, inner.Metrical)
        modelled = modelled if (outer.Command, outer.Channel) == ("app-metrical", CHANNEL) else None
    except ValueError:
        modelled = None
    if plain is not None:
        assert plain == modelled and type(plain[1]) is float
    elif modelled is not None:  # left to the models: only what the seed's producers never write
        assert not isinstance(metrical, int | float) or isinstance(metrical, bool) or "Body" in extra \
            or not isinstance(app, str), (value, modelled)
