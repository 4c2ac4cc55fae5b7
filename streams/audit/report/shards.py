"""A shard job set's page: which node owned which tasks, epoch by epoch, and how long releases paused them."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from streams.audit.plots import XAxis, label_x, pyplot, stamps, svg, when, xs_of
from streams.audit.report.tables import input_cell, numbered


def job_set_figures(found: list[dict[str, Any]], x: XAxis = "time", beside: Mapping[str, Any] | None = None
                    ) -> list[tuple[str, str]]:
    """(title, svg): which node owned which tasks over time, epoch by epoch; and each epoch's pause, from the
    input that made it to the acknowledgement that released it."""
    plt = pyplot()
    epochs = [f for f in found if f.get("plan", {}).get("new_epoch")]
    if not epochs:
        return []
    nodes = sorted({n for f in epochs for n in f["plan"]["ranges"]})
    colours = {n: plt.get_cmap("tab20")(i % 20) for i, n in enumerate(nodes)}
    fig, ax = plt.subplots(figsize=(10, 4))
    for start, stop, node, first, last in bands(found, epochs, x):
        ax.fill_between([start, stop], first - 0.5, last + 0.5, color=colours[node], linewidth=0)
    for node in nodes:
        ax.plot([], [], color=colours[node], linewidth=6, label=node)
    ax.set_ylabel("task")
    ax.legend(loc="upper left", ncol=min(len(nodes), 8), fontsize=7)
    label_x([ax], x)
    figures = [("Task ranges per node over time (one band per range, epoch by epoch)", svg(fig))]

    released = [f for f in found if f.get("plan", {}).get("released") and f["plan"].get("paused_ms") is not None]
    if released:
        fig, ax = plt.subplots(figsize=(10, 2.5))
        ax.bar([str(f["plan"]["epoch"]) for f in released], [f["plan"]["paused_ms"] for f in released],
               color="#ef5675")
        ax.set_xlabel("epoch")
        ax.set_ylabel("ms to release")
        figures.append(("Pause per epoch: from the change to its last acknowledgement", svg(fig)))
    return figures

def bands(found: list[dict[str, Any]], epochs: list[dict[str, Any]], x: XAxis) -> list[tuple[Any, Any, str, int, int]]:
    """(from, to, node, first task, last task) of each range of each epoch: an epoch holds until the next one, and
    the last one past the last record, by a twentieth of the plot (one place in input order), so that the plan
    a job set ends with is drawn even when the last record made it (a node lost at the end of the span)."""
    where = dict(zip((id(f) for f in found), xs_of(stamps(found), x), strict=True))
    first, final = where[id(found[0])], where[id(found[-1])]
    beyond = 1 if x == "order" else max((final - first) / 20, when(1_000) - when(0))
    ends = [where[id(f)] for f in epochs[1:]] + [final + beyond]
    drawn = []
    for f, end in zip(epochs, ends, strict=True):
        start = where[id(f)]
        stop = max(end, start + (1 if x == "order" else when(1) - when(0)))
        drawn += [(start, stop, node, lo, hi) for node, spans in f["plan"]["ranges"].items() for lo, hi in spans]
    return drawn

def _cells(f: dict[str, Any]) -> str:
    p = f.get("plan")
    if p is None:
        return f"{input_cell(f)}<td>{f['after']['epoch']}</td><td>(nothing changed)</td><td></td><td></td>"
    state = "released" if p["released"] else "awaiting " + ", ".join(p["awaiting"])
    return (f"{input_cell(f)}<td>{p['epoch']}</td><td>{html.escape(p['change'] if p['new_epoch'] else 'ack')}</td>"
            f"<td>{p['moved'] if p['new_epoch'] else ''}</td><td>{html.escape(state)}</td>")

def table(found: list[dict[str, Any]]) -> Iterable[str]:
    return numbered(found, "<th>input</th><th>epoch</th><th>change</th><th>moved</th><th>state</th>",
                     _cells)
