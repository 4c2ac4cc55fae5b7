"""One Faust agent per fold: the topics it reads, and a loop handing each event to the fold's `Unit`."""

from __future__ import annotations

import time
from typing import Any

import faust

from streams.settings import Settings
from streams.worker import faust_private
from streams.worker.checkpoint import Checkpoint
from streams.worker.keeper import Keeper
from streams.worker.unit import Progress, Unit


def add_fold_agent(app: faust.App, settings: Settings, keeper: Keeper[Any], checkpoint: Checkpoint,
                   progress: Progress) -> set[str]:
    """One agent folding every input topic of `keeper.fold` and its repartition topic; returns the topic names read.

    Each record goes through the fold's `Unit` (`streams.worker.unit`): admitted, routed to its
    key's partition, folded in memory and handed to the checkpoint, which writes and commits in
    batches. The events come through `faust_private.events`: Faust's stream iterator without its
    per-event turn of the event loop and sensors.
    """
    fold = keeper.fold
    names = {settings.topic(t): t for t in fold.inputs}
    repartition = settings.topic(fold.repartition)
    topic = app.topic(*names, repartition, key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw", partitions=settings.partitions)
    unit = Unit(keeper, checkpoint, names, repartition, settings.partitions, progress)
    stats = checkpoint.stats

    async def run(stream: Any) -> None:
        handled = time.perf_counter()
        async for event in faust_private.events(app, stream):
            stats.waiting += time.perf_counter() - handled
            await unit.process(event)
            handled = time.perf_counter()

    app.agent(topic, name=fold.name)(run)
    return {*names, repartition}
