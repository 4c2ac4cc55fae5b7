"""Where the infra files, the jars and the local data live; each overridable by environment."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def infra_dir() -> Path:
    return Path(os.environ.get("TRIBUNAL_INFRA_DIR", REPO_ROOT / "infra"))


def lib_dir() -> Path:
    return Path(os.environ.get("TRIBUNAL_INFRA_LIB", infra_dir() / "lib"))


def default_home() -> Path:
    """Data, logs and pid files of the servers `tribunal infra up` starts."""
    return Path(os.environ.get("TRIBUNAL_HOME", REPO_ROOT / ".tribunal"))
