"""The exported JSON Schema files are what the models say today."""

from __future__ import annotations

import json

from schemas.export import JSON_DIR, OPENAPI, rendered, rendered_openapi


def test_exported_json_schemas_are_current() -> None:
    expected = rendered()
    on_disk = {p.name: p.read_text() for p in JSON_DIR.glob("*.json")}
    stale = sorted(name for name in expected if on_disk.get(name) != expected[name])
    extra = sorted(set(on_disk) - set(expected))
    assert not stale and not extra, (
        f"stale: {stale}, no longer exported: {extra}; run `.venv/bin/python -m schemas.export`")


def test_the_checked_in_openapi_document_is_current_and_valid() -> None:
    from openapi_spec_validator import validate

    text = rendered_openapi()
    assert OPENAPI.read_text() == text, "stale; run `.venv/bin/python -m schemas.export`"
    validate(json.loads(text))  # raises on an invalid OpenAPI 3.1 document
