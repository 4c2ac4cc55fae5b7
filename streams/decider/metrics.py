"""What an actuator shows Prometheus at `/metrics`, named as the worker's are (`tribunal_<what>_<unit>`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAMES = ("tribunal_actuator_applied_total", "tribunal_actuator_failed_total", "tribunal_actuator_drift_total",
         "tribunal_actuator_reported_total", "tribunal_actuator_lag_seconds", "tribunal_actuator_behind_decisions",
         "tribunal_actuator_apply_seconds", "tribunal_actuator_leading", "tribunal_actuator_failing",
         "tribunal_actuator_recovered_total", "tribunal_actuator_restarts_total",
         "tribunal_actuator_restart_backoff_seconds")


def _registry() -> Any:
    from prometheus_client import CollectorRegistry, ProcessCollector

    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    return registry


@dataclass
class ActuatorMetrics:
    registry: Any = field(default_factory=_registry)

    def __post_init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        on = {"registry": self.registry}
        self.applied = Counter("tribunal_actuator_applied", "App counts set on the target", ["pool", "target"], **on)
        self.failed = Counter("tribunal_actuator_failed", "App counts the target failed to set (each retried)",
                              ["pool", "target"], **on)
        self.drift = Counter("tribunal_actuator_drift", "Apps found running other than what was applied (a copy "
                             "crashed, a change by hand), each put back", ["pool"], **on)
        self.reported = Counter("tribunal_actuator_reported", "Lasting differences written to the decider as "
                                "InstancesObserved", ["pool"], **on)
        self.lag = Gauge("tribunal_actuator_lag_seconds", "Age of the newest decision the target does not run yet "
                         "(0: reconciled)", ["pool"], **on)
        self.behind = Gauge("tribunal_actuator_behind_decisions", "Decisions (seq) between the newest read and the "
                            "newest the target runs", ["pool"], **on)
        self.apply_seconds = Histogram("tribunal_actuator_apply_seconds", "From a decision's broker timestamp to the "
                                       "target running it", ["pool"], buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5,
                                                                               5, 10, 30), **on)
        self.failing = Gauge("tribunal_actuator_failing", "1 while an app runs other than decided and the last try "
                             "to put it right failed (a crash loop, a target refusing)", ["pool", "app"], **on)
        self.recovered = Counter("tribunal_actuator_recovered", "Apps reported to the decider that ran as decided "
                                 "again before it acted on the report, reported again", ["pool"], **on)
        self.restarts = Counter("tribunal_actuator_restarts", "Copies started again after they died (process "
                                "target)", ["pool", "app"], **on)
        self.backoff = Gauge("tribunal_actuator_restart_backoff_seconds", "The wait before a dead copy is started "
                             "again, the longest of the app's (0: none crash-looping; process target)",
                             ["pool", "app"], **on)
        self.leading = Gauge("tribunal_actuator_leading", "1 while this actuator is the pool's elected one",
                             ["pool"], **on)

    def serve(self, host: str, port: int) -> None:
        """`/metrics` on `host:port`, from a thread of its own."""
        from prometheus_client import start_http_server

        start_http_server(port, addr=host, registry=self.registry)
