"""What a pool remembers of time when its policy measures any (HPA's stabilization, KEDA's fallback, YARN's
cool-down): the reports of each app within its windows, when each app last reported and was last preempted.

Time is event time only: the timestamp of a report, a policy, a cluster event or a pool `Tick`
(`source.event_time`: the broker's append time, as the pools' input topics are `LogAppendTime` unless the
deployment trusts its producers' clocks; a Tick's `now` field is what the ticker read). The pool's clock (`now`) is
the latest of them; a replay of the same log sees the same clock, so it decides the same.

A policy that sets none of these options has no `Timing` at all, and decides exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

Report = tuple[int, int]  # (event time in ms of the last of a run of reports with the same Number, that Number)
GIVE_ALL = -(1 << 53)  # the Number of an app handled as idle while stale: it offers everything above MinNum


class Timing(NamedTuple):
    now: int  # the pool's clock: the latest event time of its records, ms
    started: Mapping[str, int]  # app -> event time its policy took it on: silence counts from here before a report
    reported: Mapping[str, int]  # app -> event time of its last applied report (none before its first)
    reports: Mapping[str, tuple[Report, ...]]  # app -> its reports within its longest window, oldest first, runs
    # of equal Numbers kept as their last (a run's last report in the window puts its Number in the window)
    numbers: Mapping[str, int]  # app -> the Number it stands at after stabilization and stale handling
    stale: frozenset[str] = frozenset()  # apps handled by `on_stale` until they report again
    preempted: Mapping[str, int] = {}  # app -> event time it was last preempted

    def heard(self, app: str) -> int:
        """When `app` was last heard of: its last report, or when its policy took it on if that was later (a
        first report may predate the policy record)."""
        started = self.started[app]
        return max(self.reported.get(app, started), started)


class Window(NamedTuple):
    """How a stabilization window shaped one report's Number (what `explain` shows)."""

    direction: str  # "up" or "down"
    seconds: float
    raw: int  # the Number of the report's own metrical
    applied: int  # the Number applied: the smallest move of the window, or 0 when a report in it disagrees
    reports: tuple[Report, ...]  # the window's reports, the new one last

    def as_record(self) -> dict[str, object]:
        return {"direction": self.direction, "window_s": self.seconds, "raw_number": self.raw,
                "applied_number": self.applied, "reports": [list(r) for r in self.reports]}


def within(reports: tuple[Report, ...], at: int, window_ms: int) -> tuple[Report, ...]:
    """The reports of the window that ends at `at`: later than `at - window_ms`."""
    return tuple(r for r in reports if r[0] > at - window_ms)


def reported(reports: tuple[Report, ...], at: int, number: int, window_ms: int) -> tuple[Report, ...]:
    """The app's reports after one at `at` standing at `number`: those of the window, the new one last (a run
    of the same Number kept as its latest, so a steady app's window holds one entry however long it is)."""
    kept = within(reports, at, window_ms)
    if kept and kept[-1][1] == number:
        kept = kept[:-1]
    return (*kept, (at, number))


def stabilized(reports: tuple[Report, ...], raw: int, up_ms: int, down_ms: int) -> Window | None:
    """The Number a report stands at, given its app's reports (the new one last) and windows; None when no
    window applies to it (no window set for its direction, or it moves nothing).

    A give-up only when every report of the down window gives up, and then the smallest give-up of them;
    growth likewise with the up window (HPA: the most conservative recommendation of the window)."""
    if raw == 0 or (raw < 0 and not down_ms) or (raw > 0 and not up_ms):
        return None
    at = reports[-1][0]
    window = within(reports, at, down_ms if raw < 0 else up_ms)
    numbers = [n for _, n in window]
    if raw < 0:
        applied = max(numbers) if all(n < 0 for n in numbers) else 0
    else:
        applied = min(numbers) if all(n > 0 for n in numbers) else 0
    seconds = (down_ms if raw < 0 else up_ms) / 1000
    return Window("down" if raw < 0 else "up", seconds, raw, applied, window)


def went_stale(timing: Timing, stale_ms: Mapping[str, int], now: int, fresh: str | None = None) -> list[str]:
    """Apps (sorted) whose last report is at least their `stale_after` older than `now` and that are not yet
    handled as stale; `fresh` (the app reporting at `now`) never."""
    return [k for k, limit in sorted(stale_ms.items())
            if k != fresh and k not in timing.stale and now - timing.heard(k) >= limit]
