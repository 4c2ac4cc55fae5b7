"""The catalogue of tribunal's topics and creating them on the broker.

Faust subscribes only to topics that exist when a worker starts (a missing source topic is
"ignored", and records produced to it later are never read), so `tribunal worker` and
`tribunal topics create` make every topic up front. The input topics must be co-partitioned
(one partition count, key = pool, group or namespace); outputs get the same count so a key's
decisions stay in one partition, in order. Each fold names its compacted topics (`Fold.compacted`):
`policies` (the latest record per pool is its policy), `rejection-limits` (per scheduler, its
limit) and `dispatcher-health` (per namespace, its health).
Each fold also has an internal `<fold>.repartition` topic, read beside its inputs, that carries
records to their key's partition (`streams.worker.routing`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar

from streams import kafka
from streams.core.folds import FOLDS
from streams.core.outputs import SILENT_INPUTS, dlq_topic
from streams.errors import TribunalError
from streams.settings import Settings

log = logging.getLogger(__name__)
REDRIVES = "dlq-redrives"  # which dead letters `tribunal topics redrive` produced again (streams.dlq)
ACTUATIONS = "actuations"  # what `tribunal pools actuate` made of the decisions (schemas.decisions.Actuation)
SCHEDULER_ALERTS = "scheduler-alerts"  # what scheduler clients say of themselves (schemas.groups.SchedulerAlert)


TIMESTAMP_TYPES = {"broker": "LogAppendTime", "producer": "CreateTime"}


@dataclass(frozen=True)
class TopicSpec:
    name: str
    compacted: bool = False
    timestamps: str | None = None  # a fold's clock reads this topic's timestamps: who stamps them (`TIMESTAMP_TYPES`)

    def config(self) -> dict[str, str]:
        config = {"cleanup.policy": "compact" if self.compacted else "delete"}
        if self.timestamps is not None:
            config["message.timestamp.type"] = self.timestamps
        return config


def catalogue(settings: Settings) -> list[TopicSpec]:
    """Every topic tribunal reads or writes, with the deployment's prefix applied. The inputs of a fold that keeps
    a clock (`Fold.clocked`) are dated by the broker unless `settings.record_time` says otherwise."""
    stamp = TIMESTAMP_TYPES[settings.record_time]
    inputs = [TopicSpec(settings.topic(t), compacted=t in f.compacted, timestamps=stamp if f.clocked else None)
              for f in FOLDS for t in f.inputs]
    internal = [TopicSpec(settings.topic(f.repartition)) for f in FOLDS]
    dead = [TopicSpec(dlq_topic(settings.topic(t))) for f in FOLDS for t in (*f.inputs, f.repartition)]
    outputs = [TopicSpec(settings.topic(t), compacted=t in f.compacted) for f in FOLDS for t in f.outputs]
    outputs.append(TopicSpec(settings.topic(SILENT_INPUTS)))
    clients = [TopicSpec(settings.topic(REDRIVES), compacted=True), TopicSpec(settings.topic(SCHEDULER_ALERTS)),
               TopicSpec(settings.topic(ACTUATIONS))]
    return [*inputs, *internal, *outputs, *dead, *clients]


def input_topics(settings: Settings) -> list[str]:
    """Every fold's input topics, as producers write them (what replay and the audit tools read)."""
    return [settings.topic(t) for f in FOLDS for t in f.inputs]


def output_topics(settings: Settings) -> list[str]:
    """Every fold's output topics, `silent-inputs`, and the dead-letter topic of each input."""
    return ([settings.topic(t) for f in FOLDS for t in f.outputs] + [settings.topic(SILENT_INPUTS)]
            + [dlq_topic(t) for t in input_topics(settings)])


def worker_topics(settings: Settings) -> set[str]:
    """What the worker reads: every fold's inputs and its repartition topic (one partition count for all)."""
    return {*input_topics(settings), *(settings.topic(f.repartition) for f in FOLDS)}


def create_topics(settings: Settings, specs: list[TopicSpec] | None = None, change: bool = False) -> list[str]:
    """Create whichever catalogue topics are missing, with the catalogue's settings; return the names created.
    Existing topics whose settings differ (an input of a clocked fold made before the broker dated it) are
    changed with `change` (`tribunal topics create`, as a principal that may alter topic configs), else named in
    a warning: a daemon starting needs only Create and DescribeConfigs (`streams.acl`), and two daemons started
    with different `record_time` settings must not turn a topic's setting back and forth. Idempotent."""
    specs = specs if specs is not None else catalogue(settings)
    made, differing = declare_topics(settings, {spec.name: spec.config() for spec in specs}, change,
                                     co_partitioned=worker_topics(settings))
    if differing and change:
        log.warning("topics %s now have the catalogue's settings (cleanup policy, who dates their records)",
                    differing)
    elif differing:
        log.warning("topics %s do not have the catalogue's settings (cleanup policy, who dates their records): "
                    "`tribunal topics create` gives them", differing)
    return made


_TOPIC_ALREADY_EXISTS = 36  # CreateTopics' error code
_UNKNOWN_TOPIC = 3  # DescribeConfigs': a topic listed, but not yet known to the broker asked


_DYNAMIC_TOPIC_CONFIG = 1  # a DescribeConfigs entry's source: set on this topic (not a broker's or the default)


async def _declare(settings: Settings, wanted: dict[str, dict[str, str]], change: bool = True,
                   co_partitioned: Collection[str] = ()) -> tuple[list[str], list[str]]:
    from aiokafka.admin import NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = kafka.admin(settings.kafka_bootstrap, request_timeout_ms=15000)
    try:
        await admin.start()
        present = set(await admin.list_topics())
        missing = sorted(set(wanted) - present)
        if missing:
            response = await admin.create_topics([NewTopic(name, settings.partitions, settings.replication_factor,
                                                           topic_configs=wanted[name]) for name in missing])
            for topic, error, *message in response.topic_errors:
                if error == _TOPIC_ALREADY_EXISTS:  # made by another client since the listing
                    present.add(topic)
                    missing.remove(topic)
                elif error:
                    raise kafka.error_for(error, f"cannot make topic {topic}: {message[0] if message else error}")
            await _until_known(admin, missing)
        existing = sorted(set(wanted) & present)
        if not existing:
            return missing, []
        await _partitions_checked(admin, settings.partitions, sorted(set(existing) & set(co_partitioned)))
        changes = []
        for error, message, _, topic, entries in await _described(admin, existing):
            if error:
                raise kafka.error_for(error, f"cannot describe topic {topic}'s settings: {message or error}")
            own = {name: value for name, value, _, source, *_ in entries if source == _DYNAMIC_TOPIC_CONFIG}
            if any(own.get(name) != value for name, value in wanted[topic].items()):
                if None in own.values():  # a sensitive setting the broker does not show: it cannot be kept
                    raise TribunalError(f"topic {topic} has hidden settings; set {wanted[topic]} on it by hand")
                changes.append(ConfigResource(ConfigResourceType.TOPIC, topic, configs=own | wanted[topic]))
        if changes and change:
            for response in await admin.alter_configs(changes):
                for error, message, _, topic in response.resources:
                    if error:
                        raise kafka.error_for(error, f"cannot change topic {topic}'s settings: {message or error} (a "
                                                     "principal allowed to alter topic configs can: `tribunal topics "
                                                     "create`)")
            await _until_set(admin, {c.name: wanted[c.name] for c in changes})
        return missing, sorted(c.name for c in changes)
    finally:
        await admin.close()


async def _partitions_checked(admin: Any, partitions: int, topics: list[str]) -> None:
    """Refuse input topics made with another partition count: a key's records must meet its state in one."""
    if not topics:
        return
    wrong = sorted(d["topic"] for d in await admin.describe_topics(topics) if len(d["partitions"]) != partitions)
    if wrong:
        raise TribunalError(f"input topics {wrong} do not have {partitions} partitions; "
                            "inputs must be co-partitioned (set --partitions to match)")


async def _described(admin: Any, topics: list[str], tries: int = 10) -> list[Any]:
    """Each topic's DescribeConfigs result. Workers of one app start together and each declares the same topics:
    one another worker has just made may be listed before the broker asked knows it, so a topic it calls unknown
    is asked about again a few times."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    for attempt in range(tries):
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
        resources = [r for response in described for r in response.resources]
        if attempt == tries - 1 or all(r[0] != _UNKNOWN_TOPIC for r in resources):
            return resources
        await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


async def _until_known(admin: Any, topics: list[str], patience: float = 30.0) -> None:
    """Wait until the broker's metadata lists every partition of `topics`. A KRaft broker may answer a metadata
    request with "unknown topic" for a moment after the controller made the topic; a group leader that assigned
    partitions then (three workers starting together, tests/worker/test_scale_out.py) left them out, and no
    table was recovered."""
    deadline = asyncio.get_running_loop().time() + patience
    while topics:
        described = await admin.describe_topics(topics)
        topics = [d["topic"] for d in described if d["error_code"] or not d["partitions"]]
        if topics and asyncio.get_running_loop().time() > deadline:
            raise TribunalError(f"topics {topics} were made but the broker does not list them")
        if topics:
            await asyncio.sleep(0.1)


async def _until_set(admin: Any, wanted: dict[str, dict[str, str]], patience: float = 30.0) -> None:
    """Wait until the broker describes each topic with its new settings: a KRaft broker applies an AlterConfigs
    from the metadata log a moment after it answered, and a record appended before then is dated the old way."""
    deadline = asyncio.get_running_loop().time() + patience
    while wanted:
        resources = await _described(admin, sorted(wanted))
        for _, _, _, topic, entries in resources:
            own = {name: value for name, value, _, source, *_ in entries if source == _DYNAMIC_TOPIC_CONFIG}
            if all(own.get(name) == value for name, value in wanted[topic].items()):
                del wanted[topic]
        if wanted and asyncio.get_running_loop().time() > deadline:
            raise TribunalError(f"topics {sorted(wanted)} were changed but the broker does not show it")
        if wanted:
            await asyncio.sleep(0.1)


def declare_topics(settings: Settings, wanted: dict[str, dict[str, str]], change: bool = True,
                   co_partitioned: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """Create each topic named in `wanted` that is missing, with its settings (and the deployment's partitions
    and replication), and give each existing one those settings, keeping its other per-topic settings (Kafka's
    AlterConfigs replaces a topic's whole set). Returns the names created and the names changed (without
    `change`: the names whose settings differ, left as they are). Existing topics among `co_partitioned` must have
    the deployment's partition count."""
    return asyncio.run(patiently(settings, "make or change topics",
                                 lambda: _declare(settings, wanted, change, co_partitioned)))


T = TypeVar("T")


async def patiently(settings: Settings, what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, again with backoff while it fails retriably (`kafka.retriable`), for `settings.kafka_patience`
    seconds; then a `TribunalError` saying what failed. A process started a moment after a broker's loss meets
    such errors until the cluster has fenced the broker and moved its partitions' leadership (about 10 s on
    KRaft): they are no reason to exit."""
    from aiokafka.errors import KafkaError

    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.kafka_patience
    wait = 0.5
    while True:
        try:
            return await call()
        except (KafkaError, OSError, TimeoutError) as e:
            left = deadline - loop.time()
            if not kafka.retriable(e) or left <= 0:
                raise TribunalError(f"cannot {what} at {settings.kafka_bootstrap}: {kafka.reason(e)}") from None
            wait = min(wait, left)
            log.warning("cannot %s yet (%s): trying again in %.1f s (for %.0f s more)", what, kafka.reason(e),
                        wait, left)
            await asyncio.sleep(wait)
            wait = min(wait * 2, 5.0)
