"""Export every record model's JSON Schema to schemas/json/ and the dispatcher API's OpenAPI document to
schemas/openapi/ (`python -m schemas.export`; the topics' AsyncAPI document is `streams.asyncapi`'s)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from schemas.cluster import InstancesObserved, PoolCapacitySet, PoolTick
from schemas.common import Cause
from schemas.decisions import Actuation, JusticeOutcome, PoolInstances, ScalingDecision
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
from schemas.dispatch_api import openapi
from schemas.envelope import CommandEnvelope, MetricBody
from schemas.groups import (
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
from schemas.records import DeadLetter, SilentInput
from schemas.shards import LiveNode, NodeJoined, NodeLost, NodesSnapshot, ShardAck, ShardPlan, TaskCountSet

MODELS: tuple[type[BaseModel], ...] = (
    Actuation, Cause, CommandEnvelope, DeadLetter, DeciderPolicy, InstancesObserved, JusticeOutcome,
    JusticePolicy, MetricBody, PoolCapacitySet, PoolInstances, PoolTick, ScalingDecision,
    Alert, GroupHealth, JobAcquired, JobCreated, JobDeleted, JobOffers, JobReleased, MembershipSnapshot,
    RejectionLimit, SchedulerAlert, SchedulerLost, SchedulerOfflineRequested, SchedulerOnlineRequested,
    SchedulerRegistered,
    DispatcherHealth, JobCancelled, JobFailed, JobFinished, JobOutcome, JobsAccepted, JobsAssigned, JobStarted,
    MaxThreadsSet, Tick, WorkerMaxSet,
    LiveNode, NodeJoined, NodeLost, NodesSnapshot, ShardAck, ShardPlan, TaskCountSet,
    SilentInput,
)
JSON_DIR = Path(__file__).resolve().parent / "json"
OPENAPI = Path(__file__).resolve().parent / "openapi" / "dispatcher-api.json"


def rendered() -> dict[str, str]:
    """File name -> exact file text, for every model."""
    return {
        f"{model.__name__}.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        for model in MODELS
    }


def rendered_openapi() -> str:
    return json.dumps(openapi(), indent=2, sort_keys=True) + "\n"


def export(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    if directory == JSON_DIR:
        OPENAPI.parent.mkdir(exist_ok=True)
        OPENAPI.write_text(rendered_openapi())
        written.append(OPENAPI)
    return written


if __name__ == "__main__":
    for path in export(Path(sys.argv[1]) if len(sys.argv) > 1 else JSON_DIR):
        print(path)
