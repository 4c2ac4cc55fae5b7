"""tribunal's event contracts as an AsyncAPI 3.0 document: every topic, its key, the records it carries (the JSON
Schemas of `schemas/json/`), and which component writes and which reads it.

It describes the system, not a record, so it lives here rather than in `schemas` (which imports nothing of
`streams`). `make schemas` writes it to `schemas/asyncapi.json` (`python -m streams.asyncapi`); a test checks
that the file is current, that it is valid AsyncAPI 3.0, that every topic of the catalogue
(`streams.topics.catalogue`) is a channel, and that every message names an exported schema. Topic names carry
the deployment's prefix (`TRIBUNAL_TOPIC_PREFIX`), a channel parameter here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.core.folds import FOLDS

POOL, GROUP, NAMESPACE, JOB_SET = "the pool id", "the scheduler group id", "the dispatcher namespace", "the job set"

# Components, as the operation ids and summaries name them.
WORKER = "worker"  # tribunal worker
BUSINESS = "services"  # business services reporting load and capacity (or `tribunal pools metric`)
OPERATOR = "operator"  # `tribunal pools policy apply`
BRIDGE = "zk-bridge"  # tribunal groups bridge: what ZooKeeper's watches report
SCHEDULER = "scheduler"  # tribunal groups scheduler
TICKER = "ticker"  # tribunal dispatch ticker
DISPATCH_CLIENT = "dispatch-client"  # tribunal dispatch api, executor and jobs commands
SHARD_NODE = "shard-node"  # tribunal shards node (its elected leader writes shard-events)
AUDIT = "audit"  # tribunal audit replay, explain, export, report, tail
REDRIVE = "dlq-redrive"  # tribunal topics redrive
DOWNSTREAM = "downstream"  # whatever acts on decisions
ACTUATOR = "actuator"  # tribunal pools actuate, and the DeciderClient it is built on
KEDA = "keda-scaler"  # tribunal pools keda-scaler


@dataclass(frozen=True)
class Topic:
    name: str  # without the deployment's prefix
    key: str
    messages: tuple[str, ...]  # model names in schemas/json/, or inline schemas below
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    description: str
    compacted: bool = False


_INPUT_READERS = (WORKER, AUDIT)
TOPICS: tuple[Topic, ...] = (
    Topic("policies", POOL, ("DeciderPolicy", "JusticePolicy"), (OPERATOR,), _INPUT_READERS,
          "A pool's policy: the latest record per pool is in force from the next record on.", compacted=True),
    Topic("cluster-events", POOL, ("PoolCapacitySet", "InstancesObserved", "PoolTick"), (BUSINESS, ACTUATOR, TICKER),
          _INPUT_READERS, "A pool's capacity, the instances observed running, and the ticker's clock."),
    Topic("plugin_decider", POOL, ("CommandEnvelope",), (BUSINESS,), _INPUT_READERS,
          "Load reports for the decider: the seed's command envelope, `Body` a JSON `MetricBody`."),
    Topic("plugin_justice", POOL, ("CommandEnvelope",), (BUSINESS,), _INPUT_READERS,
          "Load reports of the driver app for justice, in the same envelope."),
    Topic("scaling-decisions", POOL, ("ScalingDecision",), (WORKER,), (ACTUATOR, DOWNSTREAM, AUDIT),
          "Which app grows and which gives instances up, with its cause and reasons: every app's targets, or "
          "(form: changes, as the pool's policy chooses) the targets the decision changed."),
    Topic("pool-instances", "pool/app", ("PoolInstances",), (WORKER,), (ACTUATOR, KEDA, DOWNSTREAM, AUDIT),
          "Each app's decided instances, written with the decision that set them: the desired state a client or "
          "actuator reads at start.", compacted=True),
    Topic("justice-outcomes", POOL, ("JusticeOutcome",), (WORKER,), (DOWNSTREAM, AUDIT),
          "The split the driver app's load dictates."),
    Topic("actuations", POOL, ("Actuation",), (ACTUATOR,), (DOWNSTREAM, AUDIT),
          "What each actuator pass did: applied, failed, drift put back, differences reported; what runs after it."),
    Topic("scheduler-events", GROUP, ("SchedulerRegistered", "SchedulerLost", "SchedulerOfflineRequested",
                                      "SchedulerOnlineRequested", "MembershipSnapshot"), (BRIDGE, BUSINESS),
          _INPUT_READERS, "Schedulers joining, leaving and asking to go offline; the bridge's snapshots."),
    Topic("job-events", GROUP, ("JobCreated", "JobDeleted", "JobAcquired", "JobReleased"), (BRIDGE, BUSINESS),
          _INPUT_READERS, "Jobs created, deleted, acquired and released in a scheduler group."),
    Topic("rejection-limits", "group/scheduler", ("RejectionLimit",), (WORKER,), (SCHEDULER, DOWNSTREAM, AUDIT),
          "How many jobs each scheduler may hold, recomputed from the log.", compacted=True),
    Topic("group-health", GROUP, ("GroupHealth",), (WORKER,), (DOWNSTREAM, AUDIT),
          "A group after every event: schedulers, jobs, orphans, and corrections a snapshot made."),
    Topic("job-offers", GROUP, ("JobOffers",), (WORKER,), (SCHEDULER, AUDIT), "Orphaned jobs offered to schedulers."),
    Topic("alerts", GROUP, ("Alert",), (WORKER,), (DOWNSTREAM, AUDIT), "A scheduler over its alarm threshold."),
    Topic("scheduler-alerts", GROUP, ("SchedulerAlert",), (SCHEDULER,), (DOWNSTREAM,),
          "What scheduler clients say of themselves."),
    Topic("dispatch-commands", NAMESPACE, ("MaxThreadsSet", "WorkerMaxSet", "JobsAssigned", "JobFinished",
                                           "JobFailed", "JobCancelled"), (DISPATCH_CLIENT,), _INPUT_READERS,
          "Timed jobs assigned, finished, failed or cancelled; global and per-tenant caps."),
    Topic("ticks", NAMESPACE, ("Tick",), (TICKER,), _INPUT_READERS,
          "The dispatcher's time: the worker reads no clock."),
    Topic("job-starts", NAMESPACE, ("JobStarted",), (WORKER,), (DISPATCH_CLIENT, AUDIT), "When each timed job starts."),
    Topic("job-outcomes", NAMESPACE, ("JobOutcome", "JobsAccepted"), (WORKER,), (DISPATCH_CLIENT, AUDIT),
          "What became of each command."),
    Topic("dispatcher-health", NAMESPACE, ("DispatcherHealth",), (WORKER,), (TICKER, DOWNSTREAM, AUDIT),
          "A namespace's queues and running jobs.", compacted=True),
    Topic("shard-events", JOB_SET, ("NodeJoined", "NodeLost", "TaskCountSet", "NodesSnapshot"), (SHARD_NODE,),
          _INPUT_READERS, "Nodes joining and leaving a job set, and its task count."),
    Topic("shard-acks", JOB_SET, ("ShardAck",), (SHARD_NODE,), _INPUT_READERS, "A node taking up its plan."),
    Topic("shard-plans", JOB_SET, ("ShardPlan",), (WORKER,), (SHARD_NODE, DOWNSTREAM, AUDIT),
          "Which live node owns which task range.", compacted=True),
    Topic("silent-inputs", "fold/key", ("SilentInput",), (WORKER,), (AUDIT,),
          "Inputs a fold applied that wrote nothing else, each with its position among its key's inputs: how "
          "replay places them exactly where the worker applied them."),
    Topic("dlq-redrives", "dead letter topic:partition:offset", ("RedriveMarker",), (REDRIVE,), (REDRIVE,),
          "Which dead letters `tribunal topics redrive` produced again, so none is produced twice.", compacted=True),
)
INLINE: dict[str, dict[str, Any]] = {
    "RedriveMarker": {"type": "object", "required": ["topic", "reason_code"], "additionalProperties": False,
                      "properties": {"topic": {"type": "string"}, "reason_code": {"type": "string"}}},
    "Forwarded": {"description": "The original record's key and value, as its producer sent them; headers name its "
                                 "original topic, partition and offset (streams.worker.routing)."},
}


def topics() -> tuple[Topic, ...]:
    """Every topic: the table above, each fold's repartition topic, and each input's dead letters."""
    by_name = {t.name: t for t in TOPICS}
    internal = tuple(Topic(f.repartition, by_name[f.inputs[0]].key, ("Forwarded",), (WORKER,), (WORKER,),
                           f"Records of {', '.join(f.inputs)} that arrived on another partition than their key's, "
                           "forwarded there by the worker.") for f in FOLDS)
    dead = tuple(Topic(f"{t.name}.dlq", t.key, ("DeadLetter",), (WORKER,), (AUDIT, REDRIVE),
                       f"Records of {t.name} the worker could not fold, with the reason.")
                 for t in (*TOPICS, *internal) if WORKER in t.readers)
    return (*TOPICS, *internal, *dead)


def _channel_id(name: str) -> str:
    return name.replace(".", "-")


def _message(name: str) -> dict[str, Any]:
    payload = INLINE.get(name, {"$ref": f"./json/{name}.json"})
    return {"name": name, "title": name, "contentType": "application/json", "payload": payload}


def document(version: str) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of tribunal `version`."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for topic in topics():
        cid = _channel_id(topic.name)
        for name in topic.messages:
            messages[name] = _message(name)
        config: dict[str, Any] = {"cleanup.policy": ["compact" if topic.compacted else "delete"]}
        channels[cid] = {
            "address": "{prefix}" + topic.name,
            "title": topic.name,
            "description": f"{topic.description} Key: {topic.key}.",
            "parameters": {"prefix": {"$ref": "#/components/parameters/prefix"}},
            "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in topic.messages},
            "bindings": {"kafka": {"topicConfiguration": config, "bindingVersion": "0.5.0"}},
        }
        refs = [{"$ref": f"#/channels/{cid}/messages/{name}"} for name in topic.messages]
        for action, components in (("send", topic.writers), ("receive", topic.readers)):
            for component in components:
                operations[f"{component}-{action}s-{cid}"] = {
                    "action": action, "channel": {"$ref": f"#/channels/{cid}"}, "messages": refs,
                    "summary": f"{component} {'writes' if action == 'send' else 'reads'} {topic.name}"}
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "tribunal", "version": version,
                 "description": "An event-sourced control plane for elastic scheduling: the records tribunal reads "
                                "and writes on Kafka. Values are UTF-8 JSON; keys are UTF-8 strings. Outputs "
                                "carry their cause (input topic, partition, offset, timestamp) and a per-key seq."},
        "defaultContentType": "application/json",
        "servers": {
            "local": {"host": "127.0.0.1:9092", "protocol": "kafka",
                      "description": "`tribunal infra up`: plaintext"},
            "secured-local": {"host": "127.0.0.1:9392", "protocol": "kafka-secure",
                              "description": "`tribunal infra up --secure`: SASL_SSL, SCRAM-SHA-512, ACLs",
                              "security": [{"$ref": "#/components/securitySchemes/scram"}]},
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "messages": dict(sorted(messages.items())),
            "parameters": {"prefix": {"description": "The deployment's topic prefix (TRIBUNAL_TOPIC_PREFIX), "
                                                     "e.g. 'staging.'; empty by default."}},
            "securitySchemes": {"scram": {"type": "scramSha512",
                                          "description": "A SCRAM user; `tribunal infra acl apply` grants it "
                                                         "its rights"}},
        },
    }


ASYNCAPI = Path(__file__).resolve().parents[1] / "schemas" / "asyncapi.json"


def rendered() -> str:
    from importlib.metadata import version

    return json.dumps(document(version("tribunal")), indent=2) + "\n"


if __name__ == "__main__":
    ASYNCAPI.write_text(rendered())
    print(ASYNCAPI)
