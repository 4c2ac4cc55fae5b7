"""The AsyncAPI document: current, valid AsyncAPI 3.0 (the official JSON Schema of the spec, from the
`@asyncapi/specs` package 6.11.1, Apache-2.0, in tests/schemas/specs/), and complete: every topic of the
catalogue is a channel, every message is an exported schema, every channel has a writer and a reader."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from schemas.export import JSON_DIR
from streams.asyncapi import ASYNCAPI, document, topics
from streams.asyncapi import rendered as rendered_asyncapi
from streams.settings import Settings
from streams.topics import catalogue

SPEC = Path(__file__).resolve().parent / "schemas" / "specs" / "asyncapi-3.0.0.json"


def test_the_document_is_current() -> None:
    assert ASYNCAPI.read_text() == rendered_asyncapi(), "stale; run `make schemas`"


def test_the_document_is_valid_asyncapi_3() -> None:
    spec = json.loads(SPEC.read_text())
    jsonschema.validate(json.loads(ASYNCAPI.read_text()), spec)


def test_an_invalid_document_is_caught() -> None:  # the check above can fail
    spec = json.loads(SPEC.read_text())
    broken = document("0")
    broken["operations"]["worker-receives-policies"]["action"] = "consume"
    try:
        jsonschema.validate(broken, spec)
    except jsonschema.ValidationError:
        return
    raise AssertionError("an operation with action 'consume' passed as AsyncAPI 3.0")


def test_every_topic_of_the_catalogue_is_a_channel_and_no_other() -> None:
    addresses = {c["address"].removeprefix("{prefix}") for c in document("0")["channels"].values()}
    assert addresses == {spec.name for spec in catalogue(Settings(topic_prefix=""))}


def test_every_message_is_an_exported_schema_and_every_channel_is_written_and_read() -> None:
    doc = document("0")
    for name, message in doc["components"]["messages"].items():
        ref = message["payload"].get("$ref")
        assert ref is None or (JSON_DIR / ref.removeprefix("./json/")).is_file(), name
    operations = list(doc["operations"].values())
    for cid in doc["channels"]:
        actions = {op["action"] for op in operations if op["channel"]["$ref"] == f"#/channels/{cid}"}
        assert actions == {"send", "receive"}, cid
    assert {t.name for t in topics() if t.compacted} == {s.name for s in catalogue(Settings()) if s.compacted}
