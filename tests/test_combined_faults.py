"""All four folds on three brokers through an operator's bad day of overlapping faults (`tests.faults`), sized
for two cores: a minute of load; `bench/combined_faults.py` runs the long one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import netns
from tests.faults import Day, Scale

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_every_check_holds_through_a_day_of_combined_faults(tmp_path: Path) -> None:
    reason = netns.unavailable()  # without namespaces the day has its kills and freezes, not its partitions
    network = netns.Network() if reason is None else None
    try:
        report = Day(tmp_path, Scale(seconds=60, pools=10, metrics_per_s=20, assigns_per_s=1.5, tasks=60),
                     network=network).live()
    finally:
        if network is not None:
            network.close()
    print("\n" + report.summary() + ("" if network else f"\n  no partitions: {reason}"))
    assert len(report.faults) >= 9 + (10 if network else 0), report.summary()
    if network:  # the elected bridge, cut off from ZooKeeper past its session, handed over
        assert report.figures["bridge leaderships"] >= 2, report.summary()
    assert report.figures["metrics"] == 60 * 20 and report.figures["shard runs"] > 60 * 20, report.summary()
    broken = {name: found[:3] for name, found in report.violations.items() if found}
    assert not broken, report.summary()
