"""docker-compose.yml cannot run here (no Docker engine); check it agrees with infra/ instead."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streams.infra.topology import Topology, broker_properties, zookeeper_config

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
# Settings that legitimately differ in a container network (addresses, paths, node identity).
PER_ENVIRONMENT = {"listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs",
                   "listener.security.protocol.map"}


def _kafka_env_to_property(name: str) -> str:
    # The apache/kafka image's rule: strip KAFKA_, lower-case, '___' -> '-', '__' -> '_', '_' -> '.'.
    body = name.removeprefix("KAFKA_").lower()
    return body.replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")


def _published(service: str) -> set[int]:
    return {int(p.split(":")[-1]) for p in SERVICES[service]["ports"]}


def test_services_are_zookeeper_kafka_every_process_of_tribunal_and_their_monitoring() -> None:
    assert set(SERVICES) == {"zookeeper", "kafka", "worker", "zk-bridge", "ticker", "dispatcher-api", "console",
                             "keda-scaler", "actuator", "prometheus", "grafana"}
    assert SERVICES["zk-bridge"]["command"][:3] == ["tribunal", "groups", "bridge"]
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:3.9.")
    assert SERVICES["zookeeper"]["image"].startswith("zookeeper:3.8.")


def test_ports_match_the_default_topology() -> None:
    t = Topology.default(home=Path("/unused"))
    assert _published("kafka") == {t.kafka_port}
    assert _published("zookeeper") == {t.zk_port}
    voters = SERVICES["kafka"]["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert voters.endswith(f":{t.controller_port}")


def test_broker_settings_match_infra() -> None:
    env = SERVICES["kafka"]["environment"]
    compose = {_kafka_env_to_property(k): str(v) for k, v in env.items() if k != "KAFKA_HEAP_OPTS"}
    ours = broker_properties(Topology.default(home=Path("/unused")), 0)
    shared = {k: v for k, v in ours.items() if k not in PER_ENVIRONMENT}
    assert {k: compose.get(k) for k in shared} == shared
    assert set(compose) - set(ours) == set(), "compose sets broker properties infra/ does not"


def test_zookeeper_settings_match_infra() -> None:
    env = SERVICES["zookeeper"]["environment"]
    ours = zookeeper_config(Topology.default(home=Path("/unused")))
    assert env["ZOO_TICK_TIME"] == ours["tickTime"]
    assert env["ZOO_MAX_CLIENT_CNXNS"] == ours["maxClientCnxns"]
    assert env["ZOO_ADMINSERVER_ENABLED"] == ours["admin.enableServer"]
    assert env["ZOO_4LW_COMMANDS_WHITELIST"] == ours["4lw.commands.whitelist"]


@pytest.mark.parametrize("service", ["worker", "zk-bridge"])
def test_tribunal_services_point_at_the_compose_servers(service: str) -> None:
    env = SERVICES[service]["environment"]
    kafka_listeners = SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"//{env['KAFKA_BOOTSTRAP']}" in kafka_listeners
    assert env["ZOOKEEPER_HOSTS"] == "zookeeper:2181"
    assert set(SERVICES[service]["depends_on"]) == {"kafka", "zookeeper"}


def test_prometheus_scrapes_the_worker_and_the_bridge() -> None:
    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "infra" / "prometheus" / "prometheus.yml").read_text())
    worker, bridge = config["scrape_configs"]
    port = SERVICES["worker"]["environment"]["TRIBUNAL_WEB_PORT"]
    assert worker["metrics_path"] == "/metrics" and worker["static_configs"] == [{"targets": [f"worker:{port}"]}]
    command = SERVICES["zk-bridge"]["command"]
    assert bridge["static_configs"] == [{"targets": [f"zk-bridge:{command[command.index('--metrics-port') + 1]}"]}]
    for volume in SERVICES["prometheus"]["volumes"] + SERVICES["grafana"]["volumes"]:
        assert (root / volume.split(":")[0]).is_file(), volume
