"""A pool's page: instances per app, each app's metrical against its policy ranges, outcomes; its decisions."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from streams.audit.plots import XAxis, instances_plot, label_x, pyplot, stamp, stamps, svg, when, xs_of

BAND = {-1: "#f4c7c3", 0: "#e8e8e8", 1: "#c8e6c9"}  # give up / hold / grow

def pool_figures(found: list[dict[str, Any]], x: XAxis = "time", beside: Mapping[str, Any] | None = None
                 ) -> list[tuple[str, str]]:
    """(title, svg) for the loop (with an actuator's records), instances per app, each app's metrical against its
    ranges, and outcomes."""
    plt = pyplot()
    decided = [f for f in found if "decision" in f]
    if not decided:
        return []
    times = xs_of(stamps(decided), x)
    apps = [a["app"] for a in decided[-1]["after"]["decider"]["apps"]]
    figures = []
    actuations = (beside or {}).get("actuations", [])
    if actuations and x == "time":
        figures.append(_loop(decided, times, apps, actuations))

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

def _loop(decided: list[dict[str, Any]], times: list[Any], apps: list[str],
          actuations: list[dict[str, Any]]) -> tuple[str, str]:
    """Load, decided instances and what runs (the actuator's `running`), on one time axis: the loop, closed."""
    plt = pyplot()
    fig, (load, instances) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    ran = [when(a["timestamp"]) for a in actuations]
    for i, app in enumerate(apps):
        color = f"C{i}"
        load.step(times, [_metrical(f, app) for f in decided], where="post", color=color, label=app)
        instances.step(times, [f["decision"]["instances_after"].get(app, 0) for f in decided], where="post",
                       color=color, label=f"{app} decided")
        instances.step(ran, [a["value"]["running"].get(app) for a in actuations], where="post", color=color,
                       linestyle="--", label=f"{app} running")
    drifted = [(when(a["timestamp"]), n) for a in actuations for n in a["value"].get("drift", {}).values()]
    if drifted:
        instances.scatter(*zip(*drifted, strict=True), marker="x", color="red", zorder=3,
                          label="found running (drift, put back)")
    load.set_ylabel("load (metrical)")
    load.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    instances.set_ylabel("instances")
    instances.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    label_x([load, instances], "time")
    return "The loop: load, decided instances, and what runs (the actuator's records)", svg(fig)


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

def table(found: list[dict[str, Any]]) -> Iterable[str]:
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
