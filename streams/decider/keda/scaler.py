"""`tribunal pools keda-scaler`: KEDA's external scaler (gRPC, `externalscaler.proto`) answering tribunal's instances.

A ScaledObject names a pool and an app in its trigger's metadata (`pool`, `app`; `examples/keda-scaledobject.yaml`).
`GetMetricSpec` answers one metric with a target of 1, and `GetMetrics` the app's decided instances, so the HPA
KEDA makes (desired replicas = ceil(value / target)) converges on tribunal's number. `IsActive` is true while
the app has any instance (KEDA scales from and to zero on it), and `StreamIsActive` pushes the first answer at
once and then each change of it. `StreamMetricSpec` sends the spec at once and nothing after: the target never
changes.

The instances come from the compacted `pool-instances` (written in each decision's transaction), read from its
start and followed: the server listens only once it has read to the end, so its first answer is current. A
pool or app the log has never named is NOT_FOUND (KEDA then keeps the replicas or applies its `fallback`),
rather than a zero that would scale a misspelt app away; metadata without `pool` or `app` is INVALID_ARGUMENT.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from streams import kafka
from streams.core.pools import POOL_INSTANCES
from streams.decider.keda import externalscaler_pb2 as pb
from streams.decider.keda import externalscaler_pb2_grpc as rpc
from streams.errors import ConfigError
from streams.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Instances:
    """Every app's decided instances, as `pool-instances` holds them; `changed` wakes the streams."""

    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (pool, app) -> instances
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def take(self, value: dict[str, Any]) -> bool:
        pool, app, n = value.get("pool"), value.get("app"), value.get("instances")
        if not isinstance(pool, str) or not isinstance(app, str) or not isinstance(n, int):
            return False
        self.counts[(pool, app)] = n
        return True

    async def follow(self, settings: Settings, ready: asyncio.Event) -> None:
        """Read `pool-instances` from its start, set `ready` at its end, and go on following it."""
        from aiokafka import TopicPartition

        topic = settings.topic(POOL_INSTANCES)
        consumer = kafka.consumer(settings.kafka_bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer._client.force_metadata_update()
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            if not tps:
                raise ConfigError(f"{topic} does not exist: make the catalogue's topics (`tribunal topics create`)")
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            while True:
                batch = await consumer.getmany(timeout_ms=200)
                taken = sum(self.take(v) for records in batch.values() for m in records
                            if (v := kafka.json_object(m)) is not None)
                if taken:
                    async with self.changed:
                        self.changed.notify_all()
                if not ready.is_set() and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                    log.info("read pool-instances: %d apps", len(self.counts))
                    ready.set()
        finally:
            await consumer.stop()


def _named(request: Any) -> tuple[str, str] | None:
    meta = request.scalerMetadata
    pool, app = meta.get("pool"), meta.get("app")
    return (pool, app) if pool and app else None


class Scaler(rpc.ExternalScalerServicer):
    def __init__(self, instances: Instances) -> None:
        self.instances = instances

    async def _count(self, ref: Any, context: Any) -> tuple[str, str, int]:
        import grpc

        named = _named(ref)
        if named is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "scalerMetadata needs `pool` and `app`")
            raise AssertionError  # abort raises
        n = self.instances.counts.get(named)
        if n is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no instances decided for app {named[1]!r} of pool "
                                                           f"{named[0]!r}")
            raise AssertionError
        return named[0], named[1], n

    async def IsActive(self, request: Any, context: Any) -> Any:  # the proto's names
        *_, n = await self._count(request, context)
        return pb.IsActiveResponse(result=n > 0)

    async def StreamIsActive(self, request: Any, context: Any) -> AsyncIterator[Any]:
        pool, app, n = await self._count(request, context)
        counts, active = self.instances.counts, n > 0
        yield pb.IsActiveResponse(result=active)
        while True:
            async with self.instances.changed:  # checked and waited for with no await between: no change missed
                await self.instances.changed.wait_for(partial(_turned, counts, (pool, app), active))
            active = not active
            yield pb.IsActiveResponse(result=active)

    async def GetMetricSpec(self, request: Any, context: Any) -> Any:
        pool, app, _ = await self._count(request, context)
        return pb.GetMetricSpecResponse(metricSpecs=[pb.MetricSpec(metricName=metric_name(pool, app), targetSize=1,
                                                                   targetSizeFloat=1.0)])

    async def StreamMetricSpec(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """The spec at once, as the proto asks; it never changes (target 1), so the stream then stays quiet."""
        yield await self.GetMetricSpec(request, context)
        await asyncio.Event().wait()  # until KEDA closes the stream (the call is cancelled then)

    async def GetMetrics(self, request: Any, context: Any) -> Any:
        pool, app, n = await self._count(request.scaledObjectRef, context)
        name = request.metricName or metric_name(pool, app)
        return pb.GetMetricsResponse(metricValues=[pb.MetricValue(metricName=name, metricValue=n,
                                                                  metricValueFloat=float(n))])


def _turned(counts: dict[tuple[str, str], int], named: tuple[str, str], active: bool) -> bool:
    return (counts.get(named, 0) > 0) != active


def metric_name(pool: str, app: str) -> str:
    return f"tribunal-{pool}-{app}"


@dataclass(frozen=True)
class Tls:
    cert: Path
    key: Path
    client_ca: Path | None = None  # given: clients must present a certificate it signed (mutual TLS)


async def serve(settings: Settings, host: str, port: int, tls: Tls | None = None,
                started: asyncio.Event | None = None) -> None:
    """Follow `pool-instances` and answer KEDA on host:port until cancelled."""
    import grpc

    instances = Instances()
    ready = asyncio.Event()
    following = asyncio.create_task(instances.follow(settings, ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([following, waiting], return_when=asyncio.FIRST_COMPLETED)
    if following.done():
        waiting.cancel()
        following.result()  # it failed: the error, here
    server = grpc.aio.server()
    rpc.add_ExternalScalerServicer_to_server(Scaler(instances), server)
    address = f"{host}:{port}"
    if tls is None:
        server.add_insecure_port(address)
    else:
        credentials = grpc.ssl_server_credentials(
            [(tls.key.read_bytes(), tls.cert.read_bytes())],
            root_certificates=tls.client_ca.read_bytes() if tls.client_ca else None,
            require_client_auth=tls.client_ca is not None)
        server.add_secure_port(address, credentials)
    await server.start()
    log.info("KEDA external scaler listening on %s (%s)", address, "TLS" if tls else "plaintext")
    if started is not None:
        started.set()
    try:
        await following  # runs until cancelled; its failure ends the server
    finally:
        await server.stop(grace=1.0)
