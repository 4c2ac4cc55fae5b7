"""Resolving the Kafka and ZooKeeper jars from Maven Central into an ignored directory."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from streams.errors import InfraError
from streams.infra.paths import infra_dir, lib_dir

STAMP = ".pom-sha256"


def _pom_digest(pom: Path) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def jars_current(lib: Path | None = None, pom: Path | None = None) -> bool:
    """True when `lib` holds the classpath of the current pom.xml, so nothing needs fetching."""
    lib = lib or lib_dir()
    pom = pom or infra_dir() / "pom.xml"
    stamp = lib / STAMP
    return stamp.is_file() and stamp.read_text().strip() == _pom_digest(pom) and any(lib.glob("*.jar"))


def install_jars(lib: Path | None = None, pom: Path | None = None) -> bool:
    """Copy the runtime classpath of infra/pom.xml into `lib`; return False if it was current.

    The copy goes to a sibling directory first and replaces `lib` in one rename, so an
    interrupted install never leaves a half-filled classpath that `jars_current` would accept.
    """
    lib = lib or lib_dir()
    pom = pom or infra_dir() / "pom.xml"
    if jars_current(lib, pom):
        return False
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InfraError("Maven (mvn) is not installed: run infra/bootstrap.sh, or apt-get install maven")
    lib.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".lib-", dir=lib.parent))
    try:
        proc = subprocess.run(
            [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise InfraError("mvn dependency:copy-dependencies failed: " + " | ".join(tail))
        (staging / STAMP).write_text(_pom_digest(pom) + "\n")
        if lib.exists():
            shutil.rmtree(lib)
        staging.rename(lib)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return True


def resolved_versions(lib: Path | None = None) -> dict[str, str]:
    """The versions of the main artifacts actually on the classpath, read from the jar names."""
    lib = lib or lib_dir()
    wanted = {"kafka_2.13": "kafka", "zookeeper": "zookeeper", "reload4j": "reload4j",
              "slf4j-reload4j": "slf4j-reload4j"}
    found: dict[str, str] = {}
    for jar in sorted(lib.glob("*.jar")):
        name, _, version = jar.stem.rpartition("-")
        if name in wanted:
            found[wanted[name]] = version
    return found
