"""The plain reading of job reports (`reports.read`) reads what the models read, and reads the usual reports."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from schemas import dispatch as records
from streams.core.dispatch.reports import Report, of_model, read

COMMANDS: TypeAdapter[records.Command] = TypeAdapter(records.DispatchCommand)
KINDS = ("JobFinished", "JobFailed", "JobCancelled", "Tick", "MaxThreadsSet", "Nope")
FIELDS = ("type", "namespace", "uuid", "attempt", "error", "principal", "now", "extra")
texts = st.one_of(st.sampled_from(["", "ns", "a" * 200, "a" * 201, "é", "a\\b", 'q"q', "\u2028", "e" * 10_001]),
                  st.text(max_size=12))
values = st.one_of(st.sampled_from(KINDS), texts, st.none(), st.booleans(),
                   st.integers(-2, 1_003), st.sampled_from([1.0, 2.5, 10**20, -(10**20), 1_001, 1_002]),
                   st.lists(st.integers(), max_size=2))


def fields(report: Report) -> tuple[object, ...]:
    return report.type, report.namespace, report.uuid, report.attempt, report.error


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """Near-valid reports: a valid one, then a field or two set (or repeated) to a value of any type, maybe
    escaped or not ASCII, maybe something after the object."""
    kind = draw(st.sampled_from(KINDS[:3])) if draw(st.integers(0, 4)) else draw(st.sampled_from(KINDS))
    pairs = [("type", kind), ("namespace", "ns"), ("uuid", "u-1")]
    pairs += draw(st.sampled_from([[], [("attempt", 1)], [("attempt", None)], [("error", "e")]]))
    pairs += draw(st.sampled_from([[], [("principal", "alice")], [("principal", None)]]))
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=2)) if draw(st.booleans()) else []:
        value = draw(values)
        if draw(st.booleans()):
            pairs.append((name, value))  # repeated, if it was there
        else:
            replaced = [(k, value if k == name else v) for k, v in pairs]
            pairs = replaced if name in dict(pairs) else [*pairs, (name, value)]
    if draw(st.integers(0, 9)) == 0:
        pairs = pairs[1:]  # no type
    pairs = draw(st.permutations(pairs))
    body = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=draw(st.booleans()))}"
                           for k, v in pairs) + "}"
    after = draw(st.sampled_from([" ", "x", "}"])) if draw(st.integers(0, 9)) == 0 else ""
    return (body + after).encode("utf-8", "surrogatepass")


@settings(max_examples=300)
@given(documents())
def test_a_plain_reading_is_the_models_reading(value: bytes) -> None:
    """Whatever `read` reads, the models read alike: the fold decides the same, and whatever the models refuse
    (or read as another command) goes to them, so the dead letters stay theirs."""
    report = read(value)
    if report is None:
        return
    try:
        command = COMMANDS.validate_json(value)
    except ValidationError as error:
        raise AssertionError(f"read {value!r} that the models refuse: {error}") from None
    assert isinstance(command, records.JobFinished | records.JobFailed | records.JobCancelled)
    assert fields(report) == fields(of_model(command))


@given(st.sampled_from(["JobFinished", "JobFailed", "JobCancelled"]), st.text("abc-0123456789", min_size=1,
                                                                              max_size=200),
       st.one_of(st.none(), st.integers(1, records.MAX_RETRIES + 1)), st.text("abc ", max_size=50))
def test_the_usual_reports_are_read_plainly(kind: str, uuid: str, attempt: int | None, error: str) -> None:
    """As a client writes them: the hot path reads them without the models (else it would be no faster)."""
    value: dict[str, object] = {"type": kind, "namespace": "ns", "uuid": uuid}
    if kind != "JobCancelled" and attempt is not None:
        value["attempt"] = attempt
    if kind == "JobFailed":
        value["error"] = error
    report = read(json.dumps(value).encode())
    assert report is not None
    assert fields(report) == fields(of_model(COMMANDS.validate_json(json.dumps(value))))


EDGES = [b'{"type": "JobFinished", "namespace": "ns", "uuid": "u", "attempt": %s}' % v for v in (
    b"true", b"false", b'"1"', b"1.0", b"0", b"1002", b"null", b"1001", b"1e0", b"99999999999999999999999")] + [
    b'{"type": "JobFinished", "namespace": "%s", "uuid": "%s"}' % (v, v)
    for v in (b"", b"u" * 200, b"u" * 201, b"\\u00e9")] + [
    b'{"type": "JobFailed", "namespace": "ns", "uuid": "u", "error": "%s"}' % (b"e" * n) for n in (10_000, 10_001)] + [
    b'{"type": "JobCancelled", "namespace": "ns", "uuid": "u", "attempt": 1}',
    *(b'{"type": "JobCancelled", "namespace": "ns", "uuid": "u", "principal": %s}' % v
      for v in (b'"alice"', b"null", b'""', b"5", b'"%s"' % (b"p" * 200), b'"%s"' % (b"p" * 201))),
    b'{"type": "JobFinished", "namespace": "ns", "uuid": "u", "extra": 1}',
    b'{"namespace": "ns", "uuid": "u"}',
    b'{"type": "JobFinished", "namespace": "ns", "uuid": "u", "uuid": "v"}',
    b'{"type": "JobFinished", "type": "JobCancelled", "namespace": "ns", "uuid": "u"}',
    b'{"type": "JobFinished", "namespace": "ns", "uuid": "u"}x', b'[]', b'"x"', b'{"type": 5}']


def test_a_plain_reading_is_the_models_reading_at_the_edges() -> None:
    for value in EDGES:
        test_a_plain_reading_is_the_models_reading.hypothesis.inner_test(value)  # type: ignore[attr-defined]
