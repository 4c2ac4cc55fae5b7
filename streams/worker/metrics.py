"""What a worker shows Prometheus at `/metrics` (its web port).

Counted where it happens as plain numbers (a dict increment and one bisect per record) and turned into metric
families only when Prometheus scrapes, through a custom collector (prometheus_client's way to export numbers
kept elsewhere): the hot path takes no lock and looks up no labels. `NAMES` lists every family, for the
dashboard's test.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from streams.core.outputs import DLQ, Emit

RESTARTS_ENV = "TRIBUNAL_RESTARTS_IN_PLACE"  # carried across the watchdog's re-execution
NAMES = ("tribunal_records_total", "tribunal_dead_letters_total", "tribunal_fold_seconds", "tribunal_commit_seconds",
         "tribunal_consumer_lag", "tribunal_refetches_total", "tribunal_restarts_in_place",
         "tribunal_pool_free_instances", "tribunal_group_jobs", "tribunal_group_job_capacity")


class Histogram:
    """Counts per bucket (upper bounds in seconds), and the sum."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        out, total = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out


@dataclass
class Tally:
    """The worker's counts since its process started (a restart in place starts them again, as Prometheus expects
    of a counter)."""

    records: Counter[tuple[str, str]] = field(default_factory=Counter)  # (input topic, outcome)
    dead: Counter[tuple[str, str]] = field(default_factory=Counter)  # (input topic, reason code)
    fold: Histogram = field(default_factory=lambda: Histogram(
        (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.05)))
    commit: Histogram = field(default_factory=lambda: Histogram(
        (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)))
    def forwarded(self, topic: str) -> None:
        self.records[(topic, "forwarded")] += 1

    def folded(self, topic: str, outputs: Iterable[Emit]) -> None:
        """A record folded: `dead_lettered` if it went to its DLQ (counted by reason), else `folded`."""
        for e in outputs:
            if e.stream == DLQ:
                record: Any = e.record
                reason = record.get("reason_code") if isinstance(record, Mapping) else record.reason_code
                self.dead[(topic, str(reason))] += 1
                self.records[(topic, "dead_lettered")] += 1
                return
        self.records[(topic, "folded")] += 1


class _Unobserved(Histogram):
    def observe(self, seconds: float) -> None:
        pass


class Off(Tally):
    """Counts nothing (`TRIBUNAL_METRICS=false`): what bench/e2e.py compares the counting's cost with."""

    def __init__(self) -> None:
        super().__init__(fold=_Unobserved(()), commit=_Unobserved(()))

    def forwarded(self, topic: str) -> None:
        pass

    def folded(self, topic: str, outputs: Iterable[Emit]) -> None:
        pass


def restarts_in_place() -> int:
    return int(os.environ.get(RESTARTS_ENV, "0"))


class Collector:
    """The families Prometheus reads; `lag()` gives (topic, partition) -> records not yet done, `refetches()` the
    continuity guard's count, `states()` the keys whose fold has `gauges` (those folded since the last rebalance:
    a key's gauges appear with its first record on this worker)."""

    def __init__(self, tally: Tally, lag: Any, refetches: Any, states: Any = lambda: ()) -> None:
        self.tally = tally
        self.lag = lag
        self.refetches = refetches
        self.states = states  # () -> (fold, key, state) of each key this worker holds in memory

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        t = self.tally
        records = CounterMetricFamily("tribunal_records", "Input records handled, by topic and outcome "
                                      "(folded, dead_lettered, forwarded to their key's partition); counted when "
                                      "folded: a batch a rebalance dropped is folded, and counted, again",
                                      labels=["topic", "outcome"])
        for (topic, outcome), n in sorted(t.records.items()):
            records.add_metric([topic, outcome], n)
        yield records
        dead = CounterMetricFamily("tribunal_dead_letters", "Records dead-lettered, by topic and reason code (as "
                                   "tribunal_records: a batch a rebalance dropped counts again)",
                                   labels=["topic", "reason"])
        for (topic, reason), n in sorted(t.dead.items()):
            dead.add_metric([topic, reason], n)
        yield dead
        for name, histogram, doc in (("tribunal_fold_seconds", t.fold, "Seconds folding one record"),
                                     ("tribunal_commit_seconds", t.commit,
                                      "Seconds writing and committing one batch")):
            family = HistogramMetricFamily(name, doc)
            family.add_metric([], histogram.cumulative(), histogram.sum)
            yield family
        lag = GaugeMetricFamily("tribunal_consumer_lag", "Records of an input partition not yet folded and "
                                "committed", labels=["topic", "partition"])
        for (topic, partition), n in sorted(self.lag().items()):
            lag.add_metric([topic, str(partition)], n)
        yield lag
        yield CounterMetricFamily("tribunal_refetches", "Records Faust skipped and the continuity guard fetched "
                                  "again", value=self.refetches())
        yield GaugeMetricFamily("tribunal_restarts_in_place", "Times this worker re-executed itself in place (the "
                                "stall watchdog, a failed write, a check it could not make)",
                                value=restarts_in_place())
        figures: dict[str, GaugeMetricFamily] = {}
        for fold, key, state in self.states():
            for name, value in sorted(fold.gauges(state).items()):
                gauge = figures.get(name)
                if gauge is None:
                    gauge = figures[name] = GaugeMetricFamily(name, f"Of each {fold.name} key (streams.core, "
                                                              "`Fold.gauges`)", labels=["key"])
                gauge.add_metric([key], value)
        yield from (figures[name] for name in sorted(figures))
