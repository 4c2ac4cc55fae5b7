"""KEDA's external scaler through a real gRPC client (grpcio), as KEDA calls it: KEDA itself needs Kubernetes,
which these machines do not have; the proto is the contract."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from schemas.policy import DeciderPolicy
from streams.decider import DeciderClient
from streams.decider.keda import externalscaler_pb2 as pb
from streams.decider.keda import externalscaler_pb2_grpc as rpc
from streams.infra.topology import free_ports
from tests.decider.conftest import SPEC, Loop
from tests.helpers import Service, until

KEDA = Path(__file__).resolve().parents[2] / "streams" / "decider" / "keda"


def test_the_checked_in_stubs_are_what_grpcio_tools_makes_of_the_vendored_proto(tmp_path: Path) -> None:
    where = tmp_path / "streams" / "decider" / "keda"
    where.mkdir(parents=True)
    shutil.copy(KEDA / "externalscaler.proto", where)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", ".", "--python_out=.", "--grpc_python_out=.",
                    "--pyi_out=.", "streams/decider/keda/externalscaler.proto"], cwd=tmp_path, check=True)
    for name in ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py"):
        assert (where / name).read_bytes() == (KEDA / name).read_bytes(), f"{name} is stale: run `make grpc-stubs`"


def test_the_example_scaledobject_names_what_the_scaler_reads() -> None:
    import yaml

    from streams.decider.keda.scaler import _named

    example = yaml.safe_load((KEDA.parents[2] / "examples" / "keda-scaledobject.yaml").read_text())
    [trigger] = example["spec"]["triggers"]
    assert trigger["type"] in ("external", "external-push") and trigger["metadata"]["scalerAddress"].endswith(":9090")
    assert _named(pb.ScaledObjectRef(scalerMetadata=trigger["metadata"])) == ("pool-a", "ats")


def zero_to_some() -> DeciderPolicy:
    """web may have no instance at all (KEDA scales it to zero then), and releases eagerly."""
    return DeciderPolicy.model_validate({
        "kind": "decider", "version": "k1", "capacity": 6, "initial": {"web": 0, "batch": 1},
        "apps": [{"App": "web", "Priority": 1, "MinNum": 0, "Spec": SPEC, "release": "eager"},
                 {"App": "batch", "Priority": 2, "MinNum": 1, "Spec": SPEC}]})


def ref(pool: str, app: str | None) -> Any:
    return pb.ScaledObjectRef(name="web", namespace="default",
                              scalerMetadata={"pool": pool, **({"app": app} if app else {})})


def test_spec_metrics_and_the_active_stream_follow_decisions(loop: Loop, tmp_path: Path) -> None:
    [port] = free_ports(1)
    scaler = Service(loop.env, tmp_path / "keda.log", "pools", "keda-scaler", "--port", str(port))
    pool = "keda"

    def write(act: Callable[[DeciderClient], Any]) -> None:
        async def run() -> None:
            async with DeciderClient(loop.settings, pool) as client:
                await act(client)
        asyncio.run(run())

    scaler.start()
    try:
        until(lambda: "listening" in scaler.log(), lambda: f"the scaler listening:\n{scaler.log()[-2000:]}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.ExternalScalerStub(channel)
            with pytest.raises(grpc.RpcError) as unknown:
                stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(pool, "web"), metricName="m"))
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND  # never decided: not a zero
            with pytest.raises(grpc.RpcError) as unnamed:
                stub.IsActive(ref(pool, None))
            assert unnamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT

            write(lambda c: c.apply_policy(zero_to_some()))
            until(lambda: _answers(stub, pool), "the policy's instances served")
            [spec] = stub.GetMetricSpec(ref(pool, "web")).metricSpecs
            assert (spec.metricName, spec.targetSize, spec.targetSizeFloat) == ("tribunal-keda-web", 1, 1.0)
            specs = stub.StreamMetricSpec(ref(pool, "web"))
            assert list(next(specs).metricSpecs) == [spec]  # at once, and the same as GetMetricSpec's
            specs.cancel()
            assert stub.IsActive(ref(pool, "web")).result is False
            stream = stub.StreamIsActive(ref(pool, "web"))
            assert next(stream).result is False  # the current answer at once

            write(lambda c: c.report("web", 90))  # web 0 -> 4
            assert next(stream).result is True
            [value] = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(pool, "web"),
                                                           metricName=spec.metricName)).metricValues
            assert (value.metricName, value.metricValue, value.metricValueFloat) == ("tribunal-keda-web", 4, 4.0)
            write(lambda c: c.report("web", 10))  # released: web back to 0
            assert next(stream).result is False
            stream.cancel()
            assert stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(pool, "batch"))).metricValues[
                0].metricValue == 1
    finally:
        scaler.stop()
    assert "Traceback" not in scaler.log(), scaler.log()[-3000:]


def _answers(stub: Any, pool: str) -> bool:
    try:
        stub.IsActive(ref(pool, "web"))
        return True
    except grpc.RpcError:
        return False


def test_tls_serves_a_client_that_trusts_its_ca_and_refuses_a_plaintext_one(loop: Loop, tmp_path: Path) -> None:
    from streams.decider.keda.scaler import Tls, serve
    from streams.infra.secure import _certificates

    ca, keystore = _certificates()
    split = keystore.index("-----BEGIN CERTIFICATE-----")
    (tmp_path / "key.pem").write_text(keystore[:split])
    (tmp_path / "cert.pem").write_text(keystore[split:])
    [port] = free_ports(1)

    async def scenario() -> None:
        started = asyncio.Event()
        serving = asyncio.create_task(serve(loop.settings, "127.0.0.1", port,
                                            Tls(tmp_path / "cert.pem", tmp_path / "key.pem"), started))
        await asyncio.wait_for(started.wait(), 60)
        try:
            credentials = grpc.ssl_channel_credentials(root_certificates=ca.encode())
            async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as answered:
                    await rpc.ExternalScalerStub(channel).IsActive(ref("nowhere", "web"))
                assert answered.value.code() == grpc.StatusCode.NOT_FOUND  # answered, over TLS
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as plain:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await rpc.ExternalScalerStub(plain).IsActive(ref("nowhere", "web"), timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    asyncio.run(scenario())


def test_without_its_topic_the_scaler_says_what_to_run(kafka: str) -> None:
    from streams.decider.keda.scaler import serve
    from streams.errors import ConfigError
    from streams.settings import Settings

    settings = Settings(kafka_bootstrap=kafka, topic_prefix="no-such-deployment.")
    with pytest.raises(ConfigError, match="tribunal topics create"):
        asyncio.run(asyncio.wait_for(serve(settings, "127.0.0.1", free_ports(1)[0]), 60))
