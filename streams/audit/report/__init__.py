"""The audit report: one self-contained HTML page for a pool, a scheduler group, a dispatcher namespace or a shard
job set over a time range.

Plots are drawn with matplotlib as inline SVG (no scripts, no network: the file opens anywhere and
prints as it shows). Every row of the decision table links to its explanation further down the
page, derived by the same replay as `tribunal audit explain`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streams.audit.explain import render
from streams.audit.plots import STYLE, XAxis
from streams.audit.report import dispatch, groups, pools, shards
from streams.audit.report.tables import input_cell, numbered
from streams.core.folds import FOLDS

Beside = Mapping[str, list[dict[str, Any]]]  # records other programs write about the key, by logical topic: each
# {"timestamp": ms, "value": the record} (a pool's `actuations`)
Figures = Callable[[list[dict[str, Any]], XAxis, Beside], list[tuple[str, str]]]  # (title, svg) of each plot
Table = Callable[[list[dict[str, Any]]], Iterable[str]]
PAGES: dict[str, tuple[Figures, Table]] = {  # by fold; a fold with none gets its records' table alone
    "pools": (pools.pool_figures, pools.table), "groups": (groups.group_figures, groups.table),
    "dispatch": (dispatch.namespace_figures, dispatch.table), "shards": (shards.job_set_figures, shards.table)}


def _plain(found: list[dict[str, Any]]) -> Iterable[str]:
    return numbered(found, "<th>input</th><th>outputs</th>", lambda f: f"{input_cell(f)}<td>{len(f['outputs'])}</td>")


def render_page(kind: str, key: str, found: list[dict[str, Any]], span: str, x: XAxis = "time",
                beside: Beside | None = None) -> str:
    """The page of the key `kind` names (a fold's `key_name`: pool, group, namespace, job_set)."""
    fold = next(f for f in FOLDS if f.key_name == kind)
    draw, tabulate = PAGES.get(fold.name, (lambda found, x, beside: [], _plain))
    figures, table = draw(found, x, beside or {}), tabulate(found)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tribunal audit: {kind} "
             f"{html.escape(key)}</title><style>{STYLE}</style></head><body>",
             f"<h1>tribunal audit: {kind} {html.escape(key)}</h1>",
             f"<p class='meta'>{len(found)} input records, {html.escape(span)}; every figure below is derived by "
             "replaying the log through the pure core (`tribunal audit replay --from-kafka --verify` checks it against "
             "the recorded topics).</p>"]
    if not found:
        parts.append("<p>No records for this key in the range.</p>")
    for title, svg in figures:
        parts.append(f"<h2>{html.escape(title)}</h2><figure class='plot'>{svg}</figure>")
    parts.append("<h2>Decisions</h2>")
    parts.extend(table)
    parts.append("<h2>Explanations</h2>")
    for i, f in enumerate(found):
        parts.append(f"<h3 id='explain-{i}'>{html.escape(f['input']['topic'])}[{f['input']['partition']}]"
                     f"@{f['input']['offset']}</h3><pre>{html.escape(render(f))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
