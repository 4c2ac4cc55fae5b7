"""An in-memory log of one scheduler group, folded through `groups.apply` as the agents would."""

from __future__ import annotations

import json
from typing import Any

from streams.core import groups
from streams.core.groups.codec import stored
from streams.core.outputs import Emit
from tests.core.fold_log import FoldLog

TOPIC_OF = {t: groups.SCHEDULER_EVENTS for t in ("SchedulerRegistered", "SchedulerLost", "SchedulerOfflineRequested",
                                                 "SchedulerOnlineRequested", "MembershipSnapshot")}
TOPIC_OF |= {t: groups.JOB_EVENTS for t in ("JobCreated", "JobDeleted", "JobAcquired", "JobReleased")}


def reloaded(state: groups.GroupState) -> groups.GroupState:
    """The state as a worker reads it back from its tables: the group's entry and its buckets, as JSON."""
    return groups.load(*json.loads(json.dumps([groups.dump(state), stored(state)])))


class GroupLog(FoldLog[groups.GroupState]):
    def __init__(self, group: str = "g") -> None:
        super().__init__(group, groups.GroupState(), groups.apply)
        self.group = group

    def send(self, type_: str, **fields: Any) -> list[Emit]:
        value = {"type": type_, "group": self.group, **fields}
        return self.raw(TOPIC_OF[type_], json.dumps(value).encode())

    def register(self, scheduler: str, n: int = 1, m: int = 10) -> list[Emit]:
        return self.send("SchedulerRegistered", scheduler=scheduler, address=f"{scheduler}:7000",
                         fault_tolerance=n, alarm_threshold=m)

    def jobs(self, count: int, start: int = 0) -> None:
        for i in range(start, start + count):
            self.send("JobCreated", job=f"j{i:03d}")

    def acquire(self, job: str, scheduler: str) -> list[Emit]:
        return self.send("JobAcquired", job=job, scheduler=scheduler)

    def figures(self, scheduler: str) -> dict[str, Any]:
        s = self.state
        f = s.figures_of(scheduler)
        return {"K": s.K, "S": s.S, "N": f[2], "X": f[3], "M": f[4], "refuse": f[5], "alarm": f[6]}


def of(outputs: list[Emit], stream: str) -> list[dict[str, Any]]:
    return [json.loads(e.value_bytes()) for e in outputs if e.stream == stream]
