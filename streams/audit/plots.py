"""What every audit page draws with: matplotlib as inline SVG (no scripts, no network: a page opens anywhere
and prints as it shows), the same data drawing the same bytes; times as time of day (UTC) or the inputs in
order along the x axis. The report (`streams.audit.report`) and what-if (`streams.audit.whatif`) use it."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.meta { color: #666; }
"""

XAxis = Literal["time", "order"]  # event time (time of day), or the inputs' order: a burst reads as a sequence

def when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)

def stamp(ms: int) -> str:
    """A table row's time, to the millisecond."""
    return when(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

def xs_of(timestamps: Sequence[int], x: XAxis) -> list[Any]:
    """Where each input sits on the x axis: its event time, or its place among the inputs (1, 2, ...)."""
    if x == "order":
        return list(range(1, len(timestamps) + 1))
    return [when(ms) for ms in timestamps]

def stamps(found: Iterable[Mapping[str, Any]]) -> list[int]:
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

UNITS = ((86_400_000, "days"), (3_600_000, "h"), (60_000, "min"), (1_000, "s"), (1, "ms"))

def duration_unit(durations_ms: Sequence[int]) -> tuple[int, str]:
    """(milliseconds per unit, its name): the largest unit the longest of `durations_ms` spans twice, so a job
    late by days is plotted in days, not in nine-digit milliseconds whose labels run into each other."""
    longest = max((abs(d) for d in durations_ms), default=0)
    return next(((per, name) for per, name in UNITS if longest >= 2 * per), UNITS[-1])


def members(x: XAxis, found: list[dict[str, Any]], section: str, names: list[str],
             lines: list[tuple[str, str, str]], height: float) -> str:
    """One plot per member of the state's `section` (schedulers, workers), a step line per (field, label, style)."""
    plt = pyplot()
    times = xs_of(stamps(found), x)
    fig, axes = plt.subplots(len(names), 1, figsize=(10, height * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        for field, label, style in lines:
            ax.step(times, [f["after"][section].get(name, {}).get(field) for f in found], where="post", label=label,
                    linestyle=style)
        ax.set_ylabel(name)
    axes[0, 0].legend(loc="upper left", ncol=len(lines))
    label_x(list(axes[:, 0]), x)
    return svg(fig)
