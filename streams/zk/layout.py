"""Where a scheduler group lives in ZooKeeper, under a configurable root (default `/tribunal`).

    {root}/{group}/schedulers/{id}   ephemeral, JSON {"address", "fault_tolerance", "alarm_threshold"}
    {root}/{group}/jobs/{job}        persistent: the job exists
    {root}/{group}/owners/{job}      ephemeral, the owner's id: creating it is the acquisition lock
    {root}/{group}/offline/{id}      the offline list (persistent, set by operators and `rebalance`)
    {root}/.bridge-election          the bridges' leader election (names starting with "." are not groups)
    {root}/.ticker-election          the dispatcher tickers' leader election
    {root}/.actuators/{pool}         the election among a pool's actuators
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_ROOT = "/tribunal"
KINDS = ("schedulers", "jobs", "owners", "offline")


@dataclass(frozen=True)
class Layout:
    root: str = DEFAULT_ROOT

    @property
    def election(self) -> str:
        return f"{self.root}/.bridge-election"

    @property
    def ticker_election(self) -> str:
        return f"{self.root}/.ticker-election"

    def actuator_election(self, pool: str) -> str:
        return f"{self.root}/.actuators/{pool}"

    def group(self, group: str) -> str:
        return f"{self.root}/{group}"

    def dir(self, group: str, kind: str) -> str:
        return f"{self.root}/{group}/{kind}"

    def node(self, group: str, kind: str, name: str) -> str:
        return f"{self.root}/{group}/{kind}/{name}"

    def ensure(self, zk: Any, group: str) -> None:
        for kind in KINDS:
            zk.ensure_path(self.dir(group, kind))


def registration(address: str, fault_tolerance: int, alarm_threshold: int) -> bytes:
    return json.dumps({"address": address, "fault_tolerance": fault_tolerance,
                       "alarm_threshold": alarm_threshold}, sort_keys=True).encode()


def is_group(name: str) -> bool:
    return not name.startswith(".")
