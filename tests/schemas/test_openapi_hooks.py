"""The fuzzing hooks shipped beside the dispatcher API's OpenAPI document say the one rule the schema cannot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HOOKS = Path(__file__).resolve().parents[2] / "schemas" / "openapi" / "dispatcher_api_hooks.py"


def test_the_hooks_keep_a_window_that_ends_before_it_starts_out_of_what_a_fuzzer_offers_as_valid() -> None:
    spec = importlib.util.spec_from_file_location("dispatcher_api_hooks", HOOKS)  # as schemathesis loads it
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    assert hooks._ordered({"worker": "w", "start": 5, "end": 5}) and hooks._ordered({"start": 5, "end": 6.0})
    assert not hooks._ordered({"worker": "w", "start": 5, "end": 4})
    assert hooks._ordered({"start": True, "end": 0}) and hooks._ordered(None)  # not a window: the schema's to judge
    assert "dispatcher_api_hooks.py" in (HOOKS.parent / "dispatcher-api.json").read_text()
