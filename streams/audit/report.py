"""The audit report: one self-contained HTML page for a pool, a scheduler group, a dispatcher namespace or a shard
job set over a time range.

Plots are drawn with matplotlib as inline SVG (no scripts, no network: the file opens anywhere and
prints as it shows). Every row of the decision table links to its explanation further down the
page, derived by the same replay as `tribunal explain`.
"""

from __future__ import annotations

import html
import io
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from streams.audit.explain import render

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.meta { color: #666; }
"""
BAND = {-1: "#f4c7c3", 0: "#e8e8e8", 1: "#c8e6c9"}  # give up / hold / grow
XAxis = Literal["time", "order"]  # event time (time of day), or the inputs' order: a burst reads as a sequence


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def stamp(ms: int) -> str:
    """A table row's time, to the millisecond."""
    return _when(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def xs_of(timestamps: Sequence[int], x: XAxis) -> list[Any]:
    """Where each input sits on the x axis: its event time, or its place among the inputs (1, 2, ...)."""
    if x == "order":
        return list(range(1, len(timestamps) + 1))
    return [_when(ms) for ms in timestamps]


def _stamps(found: Iterable[Mapping[str, Any]]) -> list[int]:
    return [f["input"]["timestamp"] for f in found]


def label_x(axes: list[Any], x: XAxis) -> None:
    """Time as time of day (not matplotlib's minutes:seconds.micro for short spans), or the input order; the
    label under the lowest of `axes` (they share the x axis)."""
    from matplotlib.dates import DateFormatter

    for ax in axes:
        if x == "time":
            ax.xaxis.set_major_formatter(DateFormatter("%H:%M:%S", tz=UTC))
    axes[-1].set_xlabel("time of day (UTC)" if x == "time" else "order (1, 2, ...: the inputs plotted, in order)")


def instances_plot(ax: Any, xs: list[Any], series: Mapping[str, list[int]], style: str = "-",
                   suffix: str = "") -> None:
    """A step line per app (and `free`): the instances after each input."""
    for name, values in series.items():
        ax.step(xs, values, where="post", label=name + suffix, linestyle=":" if name == "free" else style)
    ax.set_ylabel("instances")


def svg(figure: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "tribunal"  # the same data draws the same file
    import matplotlib.pyplot as plt

    return plt


def pool_figures(found: list[dict[str, Any]], x: XAxis = "time") -> list[tuple[str, str]]:
    """(title, svg) for instances per app, each app's metrical against its ranges, and outcomes."""
    plt = pyplot()
    decided = [f for f in found if "decision" in f]
    if not decided:
        return []
    times = xs_of(_stamps(decided), x)
    apps = [a["app"] for a in decided[-1]["after"]["decider"]["apps"]]
    figures = []

    fig, ax = plt.subplots(figsize=(10, 3.5))
    series = {app: [f["decision"]["instances_after"].get(app, 0) for f in decided] for app in apps}
    instances_plot(ax, times, {**series, "free": [f["decision"]["free_after"] for f in decided]})
    ax.legend(loc="upper left", ncol=len(apps) + 1)
    label_x([ax], x)
    figures.append(("Instances per app", svg(fig)))

    fig, axes = plt.subplots(len(apps), 1, figsize=(10, 2.2 * len(apps)), sharex=True, squeeze=False)
    for ax, app in zip(axes[:, 0], apps, strict=True):
        ranges = _ranges(decided, app)
        for lo, hi, number in ranges:
            ax.axhspan(lo, hi, color=BAND[(number > 0) - (number < 0)], alpha=0.8, linewidth=0)
            ax.text(times[0], (lo + hi) / 2, f"{number:+d}", fontsize=7, va="center", color="#555")
        metricals = [_metrical(f, app) for f in decided]
        ax.plot(times, metricals, marker=".", color="#1f3b73")
        ax.set_ylim(0, 100)
        ax.set_ylabel(f"{app}\nmetrical")
    label_x(list(axes[:, 0]), x)
    figures.append(("Metrical per app, against its policy ranges (red: give up, grey: hold, green: grow)",
                    svg(fig)))

    outcomes = sorted({f["decision"]["outcome"] for f in decided})
    fig, ax = plt.subplots(figsize=(10, 0.5 + 0.4 * len(outcomes)))
    ax.scatter(times, [outcomes.index(f["decision"]["outcome"]) for f in decided], marker="|", s=200)
    ax.set_yticks(range(len(outcomes)), outcomes)
    label_x([ax], x)
    figures.append(("Outcomes over time", svg(fig)))
    return figures


def _ranges(decided: list[dict[str, Any]], app: str) -> list[tuple[float, float, int]]:
    """The app's ranges under the latest policy that decided for it."""
    for found in reversed(decided):
        d = found["decision"]
        if d.get("app", {}).get("app") == app and "ranges" in d:
            return [(r["metrical"][0], r["metrical"][1], r["number"]) for r in d["ranges"]]
    return []


def _metrical(found: dict[str, Any], app: str) -> float | None:
    for a in found["after"]["decider"]["apps"]:
        if a["app"] == app:
            return float(a["metrical"])
    return None


def group_figures(found: list[dict[str, Any]], x: XAxis = "time") -> list[tuple[str, str]]:
    """(title, svg): each scheduler's X against its N and M over time."""
    if not found:
        return []
    schedulers = sorted({sid for f in found for sid in f["after"]["schedulers"]})
    if not schedulers:
        return []
    return [("Jobs held per scheduler against N and M",
             _members(x, found, "schedulers", schedulers, [("X", "X (held)", "-"), ("N", "N (limit)", "--"),
                                                           ("M", "M (alarm)", ":")], 2.0))]


def _members(x: XAxis, found: list[dict[str, Any]], section: str, names: list[str],
             lines: list[tuple[str, str, str]], height: float) -> str:
    """One plot per member of the state's `section` (schedulers, workers), a step line per (field, label, style)."""
    plt = pyplot()
    times = xs_of(_stamps(found), x)
    fig, axes = plt.subplots(len(names), 1, figsize=(10, height * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        for field, label, style in lines:
            ax.step(times, [f["after"][section].get(name, {}).get(field) for f in found], where="post", label=label,
                    linestyle=style)
        ax.set_ylabel(name)
    axes[0, 0].legend(loc="upper left", ncol=len(lines))
    label_x(list(axes[:, 0]), x)
    return svg(fig)


SHOWN_WORKERS = 12  # a namespace's page plots the workers that ran the most jobs, at most this many


def namespace_figures(found: list[dict[str, Any]], x: XAxis = "time") -> list[tuple[str, str]]:
    """(title, svg): running against the namespace's cap and pending; each busy worker's running against
    its cap; and the lateness of starts (after the acceptable start, after the expected start)."""
    plt = pyplot()
    if not found:
        return []
    times = xs_of(_stamps(found), x)
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
                        _members(x, found, "workers", workers, [("running", "running", "-"),
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


UNITS = ((86_400_000, "days"), (3_600_000, "h"), (60_000, "min"), (1_000, "s"), (1, "ms"))


def duration_unit(durations_ms: Sequence[int]) -> tuple[int, str]:
    """(milliseconds per unit, its name): the largest unit the longest of `durations_ms` spans twice, so a job
    late by days is plotted in days, not in nine-digit milliseconds whose labels run into each other."""
    longest = max((abs(d) for d in durations_ms), default=0)
    return next(((per, name) for per, name in UNITS if longest >= 2 * per), UNITS[-1])


def job_set_figures(found: list[dict[str, Any]], x: XAxis = "time") -> list[tuple[str, str]]:
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
    where = dict(zip((id(f) for f in found), xs_of(_stamps(found), x), strict=True))
    first, final = where[id(found[0])], where[id(found[-1])]
    beyond = 1 if x == "order" else max((final - first) / 20, _when(1_000) - _when(0))
    ends = [where[id(f)] for f in epochs[1:]] + [final + beyond]
    drawn = []
    for f, end in zip(epochs, ends, strict=True):
        start = where[id(f)]
        stop = max(end, start + (1 if x == "order" else _when(1) - _when(0)))
        drawn += [(start, stop, node, lo, hi) for node, spans in f["plan"]["ranges"].items() for lo, hi in spans]
    return drawn


def _table_pool(found: list[dict[str, Any]]) -> Iterable[str]:
    yield ("<table><tr><th>seq</th><th>time (UTC)</th><th>input</th><th>outcome</th><th>asked / granted</th>"
           "<th>instances after</th><th>reason</th></tr>")
    for i, f in enumerate(found):
        d = f.get("decision")
        when = stamp(f["input"]["timestamp"])
        where = f"{f['input']['topic']}[{f['input']['partition']}]@{f['input']['offset']}"
        if d is None:
            what = f.get("rejected", {}).get("reason_code") or ("justice " + f["justice"]["outcome"]
                                                                if "justice" in f else "-")
            yield (f"<tr><td></td><td>{when}</td><td><a href='#explain-{i}'>{html.escape(where)}</a></td>"
                   f"<td>{html.escape(what)}</td><td></td><td></td><td></td></tr>")
            continue
        trigger = d["trigger"]
        label = f"{trigger['app']} {trigger['metrical']:g}" if trigger["kind"] == "metric" else trigger["kind"]
        instances = ", ".join(f"{k} {v}" for k, v in d["instances_after"].items())
        yield (f"<tr><td><a href='#explain-{i}'>{d['seq']}</a></td><td>{when}</td><td>{html.escape(label)}</td>"
               f"<td>{d['outcome']}</td><td>{d['requested']:+d} / {d['granted']:+d}</td>"
               f"<td>{html.escape(instances)}</td><td>{html.escape(d['reason'])}</td></tr>")
    yield "</table>"


def _numbered(found: list[dict[str, Any]], columns: str, cells: Callable[[dict[str, Any]], str]) -> Iterable[str]:
    """A table of one row per input: its number (linked to its explanation), its time, then `cells` (after the
    header's `columns`)."""
    yield f"<table><tr><th>#</th><th>time (UTC)</th>{columns}</tr>"
    for i, f in enumerate(found):
        yield (f"<tr><td><a href='#explain-{i}'>{i + 1}</a></td><td>{stamp(f['input']['timestamp'])}</td>"
               f"{cells(f)}</tr>")
    yield "</table>"


def _input(f: dict[str, Any]) -> str:
    """The input column: a dead letter's reason code, else the record's type."""
    return f"<td>{html.escape(f.get('rejected', {}).get('reason_code') or _command(f['input']['value']))}</td>"


def _group_cells(f: dict[str, Any]) -> str:
    g = f.get("group") or {"event": f.get("rejected", {}).get("reason_code", "-"), "K": "", "S": "",
                           "sum_N": "", "note": f.get("rejected", {}).get("reason", "")}
    return (f"<td>{html.escape(g['event'])}</td><td>{g['K']}</td><td>{g['S']}</td><td>{g['sum_N']}</td>"
            f"<td>{html.escape(g['note'])}</td>")


def _namespace_cells(f: dict[str, Any]) -> str:
    made = Counter(o["type"] for o in f["outputs"] if o["type"] not in ("DispatcherHealth", "DeadLetter"))
    after = f["after"]
    outputs = html.escape(", ".join(f"{k} {v}" for k, v in sorted(made.items())))
    now = stamp(after["now"]) if after["now"] else "-"  # 0: no record has dated the namespace yet
    return (f"{_input(f)}<td>{now}</td><td>{after['running']} / {after['max']}</td>"
            f"<td>{after['pending']}</td><td>{outputs}</td>")


def _job_set_cells(f: dict[str, Any]) -> str:
    p = f.get("plan")
    if p is None:
        return f"{_input(f)}<td>{f['after']['epoch']}</td><td>(nothing changed)</td><td></td><td></td>"
    state = "released" if p["released"] else "awaiting " + ", ".join(p["awaiting"])
    return (f"{_input(f)}<td>{p['epoch']}</td><td>{html.escape(p['change'] if p['new_epoch'] else 'ack')}</td>"
            f"<td>{p['moved'] if p['new_epoch'] else ''}</td><td>{html.escape(state)}</td>")


def _table_group(found: list[dict[str, Any]]) -> Iterable[str]:
    return _numbered(found, "<th>event</th><th>K</th><th>S</th><th>sum N</th><th>note</th>", _group_cells)


def _table_namespace(found: list[dict[str, Any]]) -> Iterable[str]:
    return _numbered(found, "<th>input</th><th>now (UTC)</th><th>running / cap</th><th>held</th><th>outputs</th>",
                     _namespace_cells)


def _table_job_set(found: list[dict[str, Any]]) -> Iterable[str]:
    return _numbered(found, "<th>input</th><th>epoch</th><th>change</th><th>moved</th><th>state</th>",
                     _job_set_cells)


def _command(text: str) -> str:
    try:
        return str(json.loads(text).get("type", "?"))
    except (ValueError, AttributeError):
        return "?"


FIGURES = {"pool": pool_figures, "group": group_figures, "namespace": namespace_figures, "job_set": job_set_figures}
TABLES = {"pool": _table_pool, "group": _table_group, "namespace": _table_namespace, "job_set": _table_job_set}


def render_page(kind: str, key: str, found: list[dict[str, Any]], span: str, x: XAxis = "time") -> str:
    figures, table = FIGURES[kind](found, x), TABLES[kind](found)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tribunal audit: {kind} "
             f"{html.escape(key)}</title><style>{STYLE}</style></head><body>",
             f"<h1>tribunal audit: {kind} {html.escape(key)}</h1>",
             f"<p class='meta'>{len(found)} input records, {html.escape(span)}; every figure below is derived by "
             "replaying the log through the pure core (`tribunal replay --from-kafka --verify` checks it against "
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
