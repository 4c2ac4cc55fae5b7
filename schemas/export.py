"""Export every record model's JSON Schema to schemas/json/ (`python -m schemas.export`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas.cluster import InstancesObserved, PoolCapacitySet
from schemas.common import Cause
from schemas.decisions import JusticeOutcome, ScalingDecision
from schemas.dispatch import (
    DispatcherHealth,
    JobCancelled,
    JobFailed,
    JobFinished,
    JobOutcome,
    JobsAccepted,
    JobsAssigned,
    JobStarted,
    MaxThreadsSet,
    Tick,
    WorkerMaxSet,
)
from schemas.envelope import CommandEnvelope, MetricBody
from schemas.limits import (
    Alert,
    GroupHealth,
    JobAcquired,
    JobCreated,
    JobDeleted,
    JobOffers,
    JobReleased,
    MembershipSnapshot,
    RejectionLimit,
    SchedulerAlert,
    SchedulerLost,
    SchedulerOfflineRequested,
    SchedulerOnlineRequested,
    SchedulerRegistered,
)
from schemas.policy import DeciderPolicy, JusticePolicy
from schemas.records import DeadLetter

MODELS: tuple[type[BaseModel], ...] = (
    Cause, CommandEnvelope, DeadLetter, DeciderPolicy, InstancesObserved, JusticeOutcome,
    JusticePolicy, MetricBody, PoolCapacitySet, ScalingDecision,
    Alert, GroupHealth, JobAcquired, JobCreated, JobDeleted, JobOffers, JobReleased, MembershipSnapshot,
    RejectionLimit, SchedulerAlert, SchedulerLost, SchedulerOfflineRequested, SchedulerOnlineRequested,
    SchedulerRegistered,
    DispatcherHealth, JobCancelled, JobFailed, JobFinished, JobOutcome, JobsAccepted, JobsAssigned, JobStarted,
    MaxThreadsSet, Tick, WorkerMaxSet,
)
JSON_DIR = Path(__file__).resolve().parent / "json"


def rendered() -> dict[str, str]:
    """File name -> exact file text, for every model."""
    return {
        f"{model.__name__}.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for model in MODELS
    }


def export(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in export(Path(sys.argv[1]) if len(sys.argv) > 1 else JSON_DIR):
        print(path)
