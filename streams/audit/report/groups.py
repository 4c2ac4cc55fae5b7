"""A scheduler group's page: X per scheduler, N, K and S; its events."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from streams.audit.plots import XAxis, members
from streams.audit.report.tables import numbered


def group_figures(found: list[dict[str, Any]], x: XAxis = "time", beside: Mapping[str, Any] | None = None
                  ) -> list[tuple[str, str]]:
    """(title, svg): each scheduler's X against its N and M over time."""
    if not found:
        return []
    schedulers = sorted({sid for f in found for sid in f["after"]["schedulers"]})
    if not schedulers:
        return []
    return [("Jobs held per scheduler against N and M",
             members(x, found, "schedulers", schedulers, [("X", "X (held)", "-"), ("N", "N (limit)", "--"),
                                                           ("M", "M (alarm)", ":")], 2.0))]

def _cells(f: dict[str, Any]) -> str:
    g = f.get("group") or {"event": f.get("rejected", {}).get("reason_code", "-"), "K": "", "S": "",
                           "sum_N": "", "note": f.get("rejected", {}).get("reason", "")}
    return (f"<td>{html.escape(g['event'])}</td><td>{g['K']}</td><td>{g['S']}</td><td>{g['sum_N']}</td>"
            f"<td>{html.escape(g['note'])}</td>")

def table(found: list[dict[str, Any]]) -> Iterable[str]:
    return numbered(found, "<th>event</th><th>K</th><th>S</th><th>sum N</th><th>note</th>", _cells)
