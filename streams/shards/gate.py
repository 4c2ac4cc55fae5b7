"""Whether a node may run a task now: every condition of SPEC §6 in one place, with no I/O.

A node runs task t under epoch e only while all of these hold: its ZooKeeper session is connected
and still the one that registered it, its lease (the last answer ZooKeeper gave that session, plus
a share of the session timeout) has not run out, the leader's pause (`/shard`) is absent, e is the
newest plan's epoch, the node acknowledged e and the plan was released (every awaited node had
acknowledged: revoke before grant), and t is in the node's ranges in e. The lease is what stops
a node that was frozen (a GC pause, SIGSTOP) past its session: its clock kept running, so the
first thing it finds when it wakes is that it no longer holds anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streams.core.shards import plans


@dataclass
class Gate:
    node: str
    connected: bool = False
    registered: bool = False
    paused: bool = True  # until the node has seen that `/shard` is absent
    lease_until: float = 0.0  # monotonic seconds
    plan: dict[str, Any] | None = None  # the newest plan seen
    acked: int = 0  # the newest epoch this node acknowledged in its current session
    incarnation: int = 0  # the czxid of this node's live entry in its current registration
    mine: tuple[tuple[int, int], ...] = field(default=())  # this node's ranges in `plan`

    def see(self, plan: dict[str, Any]) -> bool:
        """Take a plan record; False if it is older than the newest seen (the compacted topic's history)."""
        if self.plan is not None and plan["epoch"] < self.plan["epoch"]:
            return False
        self.plan = plan
        self.mine = tuple((a, b) for a, b in plan["ranges"].get(self.node, ())) if self.ours(plan) else ()
        return True

    def ours(self, plan: dict[str, Any]) -> bool:
        """Whether `plan` was made for this node as registered now (not for an earlier incarnation of it)."""
        return self.registered and plan["incarnations"].get(self.node) == self.incarnation

    def leased(self, now: float) -> bool:
        return now < self.lease_until

    def refusal(self, task: int, epoch: int, now: float) -> str | None:
        """None if the node may start `task` under `epoch` at monotonic `now`, else why not."""
        plan = self.plan
        if not (self.connected and self.registered):
            return "no ZooKeeper session"
        if not self.leased(now):
            return "lease expired"
        if plan is None or epoch != plan["epoch"] or epoch < self.acked:
            return f"stale epoch {epoch} (newest {0 if plan is None else plan['epoch']}, acknowledged {self.acked})"
        if epoch != self.acked:
            return f"epoch {epoch} not acknowledged"
        if not plan["released"]:
            return f"epoch {epoch} not released"
        if self.paused:
            return "paused (/shard exists)"
        if not plans.owns(self.mine, task):
            return f"task {task} is not this node's in epoch {epoch}"
        return None

    def refusal_any(self, epoch: int, now: float) -> str | None:
        first = self.mine[0][0] if self.mine else 0
        return self.refusal(first, epoch, now) if self.mine else "owns nothing"
