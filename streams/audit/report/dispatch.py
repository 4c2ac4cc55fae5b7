"""A dispatcher namespace's page: running against the caps, held jobs and their lateness per worker; its inputs."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from streams.audit.plots import XAxis, duration_unit, label_x, members, pyplot, stamp, stamps, svg, xs_of
from streams.audit.report.tables import field_of, input_cell, numbered

SHOWN_WORKERS = 12  # a namespace's page plots the workers that ran the most jobs, at most this many

def namespace_figures(found: list[dict[str, Any]], x: XAxis = "time", beside: Mapping[str, Any] | None = None
                      ) -> list[tuple[str, str]]:
    """(title, svg): running against the namespace's cap and pending; each busy worker's running against
    its cap; and the lateness of starts (after the acceptable start, after the expected start)."""
    plt = pyplot()
    if not found:
        return []
    times = xs_of(stamps(found), x)
    figures = []

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 4.5), sharex=True)
    top.step(times, [f["after"]["running"] for f in found], where="post", label="running")
    top.step(times, [f["after"]["max"] for f in found], where="post", label="cap (max threads)", linestyle="--")
    top.set_ylabel("jobs")
    top.legend(loc="upper left", ncol=2)
    bottom.step(times, [f["after"]["pending"] for f in found], where="post", color="#7a5195")
    bottom.set_ylabel("held, not running")
    label_x([top, bottom], x)
    figures.append(("Running against the namespace's cap, and jobs held", svg(fig)))

    peak: dict[str, int] = {}
    for f in found:
        for name, w in f["after"]["workers"].items():
            peak[name] = max(peak.get(name, 0), w["running"])
    workers = sorted(sorted(peak), key=lambda name: -peak[name])[:SHOWN_WORKERS]
    if workers:
        figures.append((f"Running per worker against its cap ({len(workers)} of {len(peak)} workers, the busiest)",
                        members(x, found, "workers", workers, [("running", "running", "-"),
                                                                     ("max", "cap", "--")], 1.8)))

    starts = [s for f in found for s in f.get("starts", ())]
    if starts:
        from matplotlib.ticker import MaxNLocator

        fig, (late, delay) = plt.subplots(1, 2, figsize=(10, 3))
        for ax, since, what, colour in ((late, "acceptable_start", "acceptable start", "#ef5675"),
                                        (delay, "expected_start", "expected start", "#ffa600")):
            lateness = [s["started_at"] - s[since] for s in starts]
            per, unit = duration_unit(lateness)
            ax.hist([v / per for v in lateness], bins=30, color=colour)
            ax.set_xlabel(f"started minus {what} ({unit}{'; < 0: early' if ax is late else ''})")
            ax.ticklabel_format(axis="x", useOffset=False, style="plain")
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))  # a few short labels, whatever the spread
        late.set_ylabel("starts")
        figures.append((f"Lateness of {len(starts)} starts", svg(fig)))
    return figures

def _cells(f: dict[str, Any]) -> str:
    made = Counter(o["type"] for o in f["outputs"] if o["type"] not in ("DispatcherHealth", "DeadLetter"))
    after = f["after"]
    outputs = html.escape(", ".join(f"{k} {v}" for k, v in sorted(made.items())))
    now = stamp(after["now"]) if after["now"] else "-"  # 0: no record has dated the namespace yet
    sender = html.escape(str(field_of(f["input"]["value"], "principal") or "-"))  # who sent a command, if known
    return (f"{input_cell(f)}<td>{sender}</td><td>{now}</td><td>{after['running']} / {after['max']}</td>"
            f"<td>{after['pending']}</td><td>{outputs}</td>")

def table(found: list[dict[str, Any]]) -> Iterable[str]:
    return numbered(found, "<th>input</th><th>sent by</th><th>now (UTC)</th><th>running / cap</th><th>held</th>"
                           "<th>outputs</th>", _cells)
