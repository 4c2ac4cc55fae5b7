"""KEDA's `GetMetrics` answered by `tribunal pools keda-scaler`, beside a bare grpcio server of the same proto (issue
37).

A fresh local stack; `pool-instances` holds 1,000 apps across 100 pools (written as the worker writes them);
`tribunal pools keda-scaler` serves them. A client process (grpcio, as KEDA would call: one channel, a request at a
time) asks `GetMetrics` for random apps; beside it, the same client against a bare grpc.aio server that answers a
constant from the same generated stubs: gRPC's own cost on this machine, the floor. Goal: p99 <= 5 ms.
Run: `.venv/bin/python bench/keda.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import describe, local_stack  # type: ignore[import-not-found]

from streams import kafka
from streams.infra.topology import free_ports

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
POOLS, APPS = 100, 10


def ask(port: int, calls: int, seed: int) -> list[float]:
    """`calls` GetMetrics, one at a time on one channel; each one's milliseconds."""
    import grpc

    from streams.decider.keda import externalscaler_pb2 as pb
    from streams.decider.keda import externalscaler_pb2_grpc as rpc

    rng = random.Random(seed)
    took = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = rpc.ExternalScalerStub(channel)
        for i in range(calls + 200):
            ref = pb.ScaledObjectRef(name="s", namespace="default", scalerMetadata={
                "pool": f"pool-{rng.randrange(POOLS):03d}", "app": f"app-{rng.randrange(APPS)}"})
            started = time.perf_counter()
            stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName="m"))
            if i >= 200:  # the first ones warm the channel
                took.append((time.perf_counter() - started) * 1000)
    return took


def bare(port: int) -> None:
    """The floor: a grpc.aio server of the same service answering a constant."""
    import grpc

    from streams.decider.keda import externalscaler_pb2 as pb
    from streams.decider.keda import externalscaler_pb2_grpc as rpc

    class Constant(rpc.ExternalScalerServicer):
        async def GetMetrics(self, request, context):  # type: ignore[no-untyped-def]
            return pb.GetMetricsResponse(metricValues=[pb.MetricValue(metricName="m", metricValue=3,
                                                                      metricValueFloat=3.0)])

    async def serve() -> None:
        server = grpc.aio.server()
        rpc.add_ExternalScalerServicer_to_server(Constant(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("listening", flush=True)
        await server.wait_for_termination()

    asyncio.run(serve())


def percentiles(ms: list[float]) -> str:
    ms = sorted(ms)
    return (f"p50 {statistics.median(ms):.3f} ms, p99 {ms[int(len(ms) * 0.99)]:.3f} ms, "
            f"max {ms[-1]:.3f} ms ({len(ms)} calls)")


def started(argv: list[str], env: dict[str, str], word: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if word in line:
            return process
    raise SystemExit(f"{argv[0]} ended before it listened")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--bare-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        bare(args.bare_server)
        return
    print(describe())
    with local_stack("keda") as cluster:
        bootstrap = cluster.topology.bootstrap
        env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "TRIBUNAL_TOPIC_PREFIX": "keda."}
        subprocess.run([TRIBUNAL, "topics", "create"], env=env, check=True, capture_output=True)

        async def fill() -> None:
            producer = kafka.producer(bootstrap, acks="all")
            await producer.start()
            for p in range(POOLS):
                for a in range(APPS):
                    pool, app = f"pool-{p:03d}", f"app-{a}"
                    value = {"type": "PoolInstances", "pool": pool, "app": app, "instances": (p + a) % 7, "seq": 1,
                             "policy_version": "v1", "cause": {"topic": "policies", "partition": 0, "offset": p,
                                                               "timestamp": 0, "position": 1}}
                    await producer.send("keda.pool-instances", json.dumps(value).encode(), key=f"{pool}/{app}".encode())
            await producer.flush()
            await producer.stop()

        asyncio.run(fill())
        ours, floor = free_ports(2)
        scaler = started([TRIBUNAL, "pools", "keda-scaler", "--port", str(ours)], env, "listening")
        peer = started([sys.executable, __file__, "--bare-server", str(floor)], env, "listening")
        try:
            for round_ in (1, 2):  # alternated, twice: the machine is shared
                for name, port in (("bare grpc.aio server", floor), ("tribunal pools keda-scaler", ours)):
                    print(f"  round {round_} {name:22s} GetMetrics {percentiles(ask(port, args.calls, round_))}",
                          flush=True)
        finally:
            for process in (scaler, peer):
                process.terminate()
                process.wait(30)


if __name__ == "__main__":
    main()
