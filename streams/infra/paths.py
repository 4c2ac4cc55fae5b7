"""Where the infra files, the jars and the local data live; each overridable by environment."""

from __future__ import annotations

import os
from pathlib import Path

from streams.settings import REPO_ROOT, default_home

__all__ = ["REPO_ROOT", "default_home", "infra_dir", "lib_dir"]


def infra_dir() -> Path:
    return Path(os.environ.get("TRIBUNAL_INFRA_DIR", REPO_ROOT / "infra"))


def lib_dir() -> Path:
    return Path(os.environ.get("TRIBUNAL_INFRA_LIB", infra_dir() / "lib"))
