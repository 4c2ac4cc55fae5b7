"""The deployment files, checked offline (no cluster and no Docker engine here): every Kubernetes manifest against
the Kubernetes API's own schemas (kubernetes-validate, strict), KEDA's resources against KEDA's CRDs (vendored), the
compose file against the Compose specification's JSON Schema (vendored), every command they run against the CLI
(`tribunal ... --help` with the same arguments), and the Kafka and ZooKeeper versions against infra/pom.xml."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import TRIBUNAL

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
VENDOR = KUBE / "vendor"
KUBERNETES_VERSION = "1.33.0"  # the version the manifests are written for (and validated against)
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def manifests() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, doc) for path in sorted(KUBE.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def containers() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, doc in manifests():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        found += [(f"{name}:{c['name']}", c) for c in spec.get("containers", ())]
    return found


def test_the_kustomization_names_every_manifest_and_only_those() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in KUBE.glob("*.yaml")
                                                        if p.name != "kustomization.yaml")


@pytest.mark.parametrize("name,doc", manifests(), ids=lambda v: v if isinstance(v, str) else v.get("kind", "?"))
def test_every_manifest_validates_against_its_schema(name: str, doc: dict[str, Any]) -> None:
    if doc["apiVersion"].startswith("keda.sh/"):
        _validate_crd(doc)
        return
    import kubernetes_validate

    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def _validate_crd(doc: dict[str, Any]) -> None:
    import jsonschema

    plural = {"ScaledObject": "scaledobjects", "TriggerAuthentication": "triggerauthentications"}[doc["kind"]]
    crd = yaml.safe_load((VENDOR / f"keda.sh_{plural}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if f"keda.sh/{v['name']}" == doc["apiVersion"])
    schema = version["schema"]["openAPIV3Schema"]
    jsonschema.validate({k: v for k, v in doc.items() if k != "status"}, schema)


def test_a_manifest_that_is_wrong_is_refused() -> None:
    """The checks can fail: a misspelt field and a ScaledObject without its target are refused."""
    import jsonschema
    import kubernetes_validate

    deployment = next(doc for _, doc in manifests() if doc["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replicaz": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    scaled = next(doc for _, doc in manifests() if doc["kind"] == "ScaledObject")
    with pytest.raises(jsonschema.ValidationError):
        _validate_crd({**scaled, "spec": {k: v for k, v in scaled["spec"].items() if k != "scaleTargetRef"}})


@pytest.mark.parametrize("where,container", containers() + [
    (f"docker-compose.yml:{name}", {"command": service["command"]}) for name, service in COMPOSE["services"].items()
    if service.get("command", [""])[0] == "tribunal"], ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_a_deployment_runs_is_one_the_cli_takes(where: str, container: dict[str, Any]) -> None:
    line = [*container.get("command", ()), *container.get("args", ())]
    assert line[0] == "tribunal", where
    done = subprocess.run([TRIBUNAL, *line[1:], "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Usage:" in done.stdout, (where, done.stderr)


def test_the_compose_file_follows_the_compose_specification_and_runs_every_process() -> None:
    import json

    import jsonschema

    jsonschema.Draft7Validator(json.loads((VENDOR / "compose-spec.json").read_text())).validate(COMPOSE)
    commands = {" ".join(w for w in service["command"][1:3] if not w.startswith("-"))
                for service in COMPOSE["services"].values() if service.get("command", [""])[0] == "tribunal"}
    assert commands >= {"worker", "groups bridge", "dispatch ticker", "dispatch api", "console", "pools keda-scaler",
                        "pools actuate"}
    assert all("healthcheck" in service for name, service in COMPOSE["services"].items()
               if name not in ("prometheus", "grafana"))


def test_kafka_and_zookeeper_are_the_versions_infra_installs() -> None:
    pom = (ROOT / "infra" / "pom.xml").read_text()
    kafka = re.search(r"<kafka.version>([^<]+)<", pom).group(1)  # type: ignore[union-attr]
    zookeeper = re.search(r"<zookeeper.version>([^<]+)<", pom).group(1)  # type: ignore[union-attr]
    assert COMPOSE["services"]["kafka"]["image"] == f"apache/kafka:{kafka}"
    assert COMPOSE["services"]["zookeeper"]["image"] == f"zookeeper:{zookeeper}"
