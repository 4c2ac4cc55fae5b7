"""The decision table every report page has: one row per input, linked to its explanation further down."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable
from typing import Any

from streams.audit.plots import stamp


def numbered(found: list[dict[str, Any]], columns: str, cells: Callable[[dict[str, Any]], str]) -> Iterable[str]:
    """A table of one row per input: its number (linked to its explanation), its time, then `cells` (after the
    header's `columns`)."""
    yield f"<table><tr><th>#</th><th>time (UTC)</th>{columns}</tr>"
    for i, f in enumerate(found):
        yield (f"<tr><td><a href='#explain-{i}'>{i + 1}</a></td><td>{stamp(f['input']['timestamp'])}</td>"
               f"{cells(f)}</tr>")
    yield "</table>"

def input_cell(f: dict[str, Any]) -> str:
    """The input column: a dead letter's reason code, else the record's type."""
    return f"<td>{html.escape(f.get('rejected', {}).get('reason_code') or command(f['input']['value']))}</td>"

def command(text: str) -> str:
    return str(field_of(text, "type", "?"))


def field_of(text: str, name: str, default: object = None) -> object:
    """A field of an input record's JSON text (`default` where it is no JSON object or has none)."""
    try:
        return json.loads(text).get(name, default)
    except (ValueError, AttributeError):
        return default
