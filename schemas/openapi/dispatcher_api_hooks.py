"""What a fuzzer must be told of the dispatcher API beyond its OpenAPI document, shipped beside it.

One rule: an assignment's `end` is not before its `start`. JSON Schema cannot compare two fields, so the
document says it in the operation's text, and a fuzzer offered the document alone takes such a body for a
valid one and reports its 422 (schemathesis's ST202). With these hooks it does not offer one:

    SCHEMATHESIS_HOOKS=schemas/openapi/dispatcher_api_hooks.py schemathesis run http://HOST:PORT/openapi.json
"""

from __future__ import annotations

from typing import Any

import schemathesis


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ordered(body: Any) -> bool:
    if isinstance(body, dict) and _number(body.get("start")) and _number(body.get("end")):
        return bool(body["end"] >= body["start"])
    return True


@schemathesis.hook
def filter_body(context: Any, body: Any) -> bool:
    return _ordered(body)


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    return _ordered(case.body)
