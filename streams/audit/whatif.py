"""What-if: a pool's recorded inputs replayed under a candidate decider policy, beside what was decided.

Both runs go through the same pure fold the worker runs (`streams.core.pools.apply`), over the same inputs in
the order the worker applied them, so every difference is the policy's. The candidate stands from the first
input of the range on: it is adopted there (as a policy record would be: instances carried over), and each
decider policy record of the pool within the range applies the candidate in its place. Before the range
the policies in force apply, so the candidate starts from the pool as it really was.

The candidate is replayed as if in force even when its document says `observe_only` (an observe-only
replay would change nothing to compare). Nothing is written to the broker.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from schemas.policy import DeciderPolicy, published
from streams.audit.plots import STYLE, XAxis, instances_plot, label_x, pyplot, stamp, svg, xs_of
from streams.core.folds import POOLS, scope
from streams.core.pools import POLICIES, SCALING_DECISIONS, PoolState, apply, decider, self_contained
from streams.core.source import SourceRecord

FLAP_MS = 60_000  # an app growing and shrinking (or the reverse) within a minute flaps
SUBSTANCE = ("trigger", "outcome", "requested", "granted", "moves", "instances", "free", "capacity",
             "reason_code", "mode")  # what a decision decides; its seq, version and wording aside


@dataclass
class Run:
    """One policy's replay of the range: per input, its decisions and the pool's instances after it."""

    decisions: list[list[dict[str, Any]]] = field(default_factory=list)
    instances: list[dict[str, int]] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    start: dict[str, int] = field(default_factory=dict)  # instances when the range began
    adopted: str | None = None  # the candidate's adoption, as its decision's reason

    def instance_hours(self, end: int) -> dict[str, float]:
        """Per app, the instances it held integrated over event time, from the range's first input to `end`:
        what an input left stands until the next input."""
        hours: dict[str, float] = {}
        until = [*self.times[1:], max(end, self.times[-1])] if self.times else []
        for t, held, stop in zip(self.times, self.instances, until, strict=True):
            for app, n in held.items():
                hours[app] = hours.get(app, 0.0) + n * (stop - t) / 3_600_000
        return dict(sorted(hours.items()))

    def figures(self, end: int) -> dict[str, Any]:
        """What the what-if compares, as JSON-able data."""
        return {"instance_hours": {k: round(v, 6) for k, v in self.instance_hours(end).items()},
                "preempted_instances": self.preemptions(), "refusals": self.refusals(),
                "refused_instances": self.refused(), "flaps": self.flaps()}

    def preemptions(self) -> int:
        return sum(m["count"] for ds in self.decisions for d in ds for m in d["moves"] if m["round"] == "preempt")

    def refusals(self) -> int:
        """Decisions that granted less than was asked (rejected or partial)."""
        return sum(d["outcome"] in ("rejected", "partial") for ds in self.decisions for d in ds)

    def refused(self) -> int:
        """Instances asked for and not granted."""
        return sum(d["requested"] - d["granted"] for ds in self.decisions for d in ds)

    def flaps(self) -> dict[str, int]:
        """Per app, how often its instances turned: grew less than a minute after they last shrank, or shrank
        less than a minute after they last grew."""
        out: dict[str, int] = {}
        last: dict[str, tuple[int, int]] = {}  # app -> (time, sign) of its last change
        previous = self.start
        for t, now in zip(self.times, self.instances, strict=True):
            for app in sorted(now):
                delta = now[app] - previous.get(app, 0)
                if not delta:
                    continue
                sign = 1 if delta > 0 else -1
                before = last.get(app)
                if before is not None and before[1] != sign and t - before[0] < FLAP_MS:
                    out[app] = out.get(app, 0) + 1
                last[app] = (t, sign)
                out.setdefault(app, 0)
            previous = now
        return dict(sorted(out.items()))


@dataclass
class Difference:
    record: SourceRecord
    in_force: list[dict[str, Any]]
    candidate: list[dict[str, Any]]


@dataclass
class Comparison:
    pool: str
    candidate: str  # its version
    in_force: Run
    under_candidate: Run
    inputs: list[SourceRecord]
    differences: list[Difference]
    end: int  # event time the instance-hours run to

    def summary(self) -> dict[str, Any]:
        """The figures side by side, and every difference, as JSON-able data (`--json`)."""
        return {"pool": self.pool, "candidate": self.candidate, "inputs": len(self.inputs),
                "decisions": sum(map(len, self.in_force.decisions)), "differ": len(self.differences),
                "adopted": self.under_candidate.adopted, "in_force": self.in_force.figures(self.end),
                "under_candidate": self.under_candidate.figures(self.end),
                "differences": [{"input": _coordinates(d.record), "timestamp": d.record.timestamp,
                                 "in_force": d.in_force, "candidate": d.candidate} for d in self.differences]}


def substance(decision: Mapping[str, Any]) -> dict[str, Any]:
    return {k: decision.get(k) for k in SUBSTANCE}


def _coordinates(record: SourceRecord) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"


def _is_decider_policy(record: SourceRecord, logical: str) -> bool:
    if logical != POLICIES or not record.value:
        return False
    try:
        value = orjson.loads(record.value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(value, dict) and value.get("kind") == "decider"


def _replay(records: list[tuple[SourceRecord, str]], in_range: Callable[[SourceRecord], bool],
            candidate: DeciderPolicy | None) -> tuple[Run, list[SourceRecord]]:
    """Fold the pool's (record, logical topic) pairs, keeping what the range's inputs decide; with `candidate`,
    it stands from the range's first input on."""
    run, state, switched = Run(), PoolState(), False
    inputs: list[SourceRecord] = []
    as_record = orjson.dumps(published(candidate)) if candidate is not None else b""
    for record, logical in records:
        counted = in_range(record)
        if counted and not inputs:
            run.start = _instances(state)
            if candidate is not None and state.decider is not None and state.decider.policy.source != candidate:
                adopted, verdict = decider.adopt(state.decider, candidate, record.timestamp)
                state, run.adopted = state.with_decider(adopted), verdict.reason
            switched = candidate is not None
        if switched and record.value != as_record and _is_decider_policy(record, logical):
            record = record._replace(value=as_record)
        state, outputs = apply(self_contained(state), record, logical)  # both runs' decisions state every app
        if counted:
            inputs.append(record)
            run.decisions.append([orjson.loads(o.value_bytes()) for o in outputs if o.stream == SCALING_DECISIONS])
            run.instances.append(_instances(state))
            # applied order is not event-time order across partitions: a clock that never runs back
            run.times.append(max(record.timestamp, run.times[-1]) if run.times else record.timestamp)
    return run, inputs


def _instances(state: PoolState) -> dict[str, int]:
    return dict(state.decider.by_name()[0]) if state.decider is not None else {}


def compare(records: Iterable[SourceRecord], pool: str, candidate: DeciderPolicy, prefix: str = "",
            in_range: Callable[[SourceRecord], bool] = lambda _: True, end: int | None = None) -> Comparison:
    """The pool's inputs among `records` (in applied order) replayed as recorded and under `candidate`."""
    mine = [(r, r.topic.removeprefix(prefix)) for r in records if scope(r, prefix) == (POOLS.name, pool)]
    as_if_in_force = candidate.model_copy(update={"observe_only": False})
    in_force, inputs = _replay(mine, in_range, None)
    under, _ = _replay(mine, in_range, as_if_in_force)
    differences = [Difference(r, a, b) for r, a, b in zip(inputs, in_force.decisions, under.decisions, strict=True)
                   if [substance(d) for d in a] != [substance(d) for d in b]]
    last = inputs[-1].timestamp if inputs else 0
    return Comparison(pool, candidate.version, in_force, under, inputs, differences,
                      max(last, end) if end is not None else last)


# -- what operators read ----------------------------------------------------------------------------------------
def _brief(decisions: list[dict[str, Any]]) -> str:
    """A decision in a line: outcome, moves and the instances after (several: joined)."""
    if not decisions:
        return "no decision"
    parts = []
    for d in decisions:
        moves = ", ".join(f"{m['from']}->{m['to']} {m['count']} ({m['round']})" for m in d["moves"]) or "no moves"
        after = ", ".join(f"{k} {v}" for k, v in d["instances"].items())
        parts.append(f"{d['outcome']} [{d['reason_code']}]: {moves}; {after}")
    return " | ".join(parts)


def _rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(measure, in force, candidate): the summary table's rows."""
    a, b = c.in_force.figures(c.end), c.under_candidate.figures(c.end)
    hours_a, hours_b = a["instance_hours"], b["instance_hours"]
    rows = [(f"instance-hours {app}", f"{hours_a.get(app, 0):.3f}", f"{hours_b.get(app, 0):.3f}")
            for app in sorted(hours_a.keys() | hours_b.keys())]
    rows += [("preempted instances", str(a["preempted_instances"]), str(b["preempted_instances"])),
             ("refusals (rejected or partial)", str(a["refusals"]), str(b["refusals"])),
             ("instances refused", str(a["refused_instances"]), str(b["refused_instances"]))]
    flaps_a, flaps_b = a["flaps"], b["flaps"]
    rows += [(f"flaps {app} (turns within {FLAP_MS // 1000} s)", str(flaps_a.get(app, 0)), str(flaps_b.get(app, 0)))
             for app in sorted(flaps_a.keys() | flaps_b.keys())]
    return rows


def render_text(c: Comparison, shown: int = 10) -> str:
    decided = sum(map(len, c.in_force.decisions))
    lines = [f"what-if for pool {c.pool}: candidate {c.candidate} against the policies in force, "
             f"{len(c.inputs)} inputs, {decided} decisions"]
    if c.under_candidate.adopted:
        lines.append(f"candidate adopted at the range's first input: {c.under_candidate.adopted}")
    rows = _rows(c)
    width = max([len(r[0]) for r in rows] + [10])
    lines.append(f"{'':<{width}}  {'in force':>12}  {'candidate':>12}")
    lines += [f"{name:<{width}}  {a:>12}  {b:>12}" for name, a, b in rows]
    lines.append(f"decisions that differ: {len(c.differences)} of {len(c.inputs)} inputs")
    for d in c.differences[:shown]:
        lines += [f"  input {_coordinates(d.record)} at {d.record.timestamp}: "
                  f"{(d.record.value or b'').decode('utf-8', 'replace')[:120]}",
                  f"    in force:  {_brief(d.in_force)}", f"    candidate: {_brief(d.candidate)}"]
    if len(c.differences) > shown:
        lines.append(f"  ... and {len(c.differences) - shown} more (--html or --json lists them all)")
    return "\n".join(lines)


SHOWN_ROWS = 1000  # differences listed on the page, at most


def render_html(c: Comparison, x: XAxis = "time") -> str:
    """One self-contained page: the figures side by side, instances per app under both, the differences."""
    esc = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>tribunal audit what-if: pool "
             f"{esc(c.pool)}</title><style>{STYLE}</style></head><body>",
             f"<h1>What-if: pool {esc(c.pool)} under {esc(c.candidate)}</h1>",
             f"<p class='meta'>{len(c.inputs)} recorded inputs replayed through the pure core twice: with the "
             f"policies in force, and with the candidate from the first input on. Nothing was written to the "
             f"broker.{' ' + esc(c.under_candidate.adopted) if c.under_candidate.adopted else ''}</p>",
             "<table><tr><th></th><th>in force</th><th>candidate</th></tr>"]
    parts += [f"<tr><td>{esc(n)}</td><td>{a}</td><td>{b}</td></tr>" for n, a, b in _rows(c)]
    parts.append(f"<tr><td>decisions that differ</td><td colspan='2'>{len(c.differences)} of {len(c.inputs)} "
                 "inputs</td></tr></table>")
    if c.inputs:
        plt = pyplot()
        xs = xs_of([r.timestamp for r in c.inputs], x)
        apps = sorted({a for run in (c.in_force, c.under_candidate) for i in run.instances for a in i})
        fig, axes = plt.subplots(len(apps), 1, figsize=(10, 1.8 * len(apps) + 0.6), sharex=True, squeeze=False)
        for ax, app in zip(axes[:, 0], apps, strict=True):
            instances_plot(ax, xs, {app: [i.get(app, 0) for i in c.in_force.instances]}, "-", " (in force)")
            instances_plot(ax, xs, {app: [i.get(app, 0) for i in c.under_candidate.instances]}, "--", " (candidate)")
            ax.legend(loc="upper left", ncol=2, fontsize=8)
        label_x(list(axes[:, 0]), x)
        parts.append(f"<h2>Instances per app: in force (solid) and candidate (dashed)</h2><figure class='plot'>"
                     f"{svg(fig)}</figure>")
    parts.append("<h2>Decisions that differ</h2><table><tr><th>input</th><th>time (UTC)</th><th>record</th>"
                 "<th>in force</th><th>candidate</th></tr>")
    for d in c.differences[:SHOWN_ROWS]:
        parts.append(f"<tr><td>{esc(_coordinates(d.record))}</td><td>{stamp(d.record.timestamp)}</td>"
                     f"<td>{esc((d.record.value or b'').decode('utf-8', 'replace')[:200])}</td>"
                     f"<td>{esc(_brief(d.in_force))}</td><td>{esc(_brief(d.candidate))}</td></tr>")
    parts.append("</table>")
    if len(c.differences) > SHOWN_ROWS:
        parts.append(f"<p>... and {len(c.differences) - SHOWN_ROWS} more (`--json` lists them all).</p>")
    parts.append("</body></html>")
    return "\n".join(parts)
