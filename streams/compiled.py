"""Which core runs: compiled by mypyc, or pure Python. Both give the same bytes; one is faster.

`make setup` compiles the pure core (`streams/core`) with mypyc, in place: an extension module
beside each source, which Python's import system prefers to the source. Pure Python runs instead
when `TRIBUNAL_PURE=1` asks for it (to compare, or to step through the core in a debugger), when
nothing was compiled (no C compiler), or when a source changed since the build: an extension
built from older sources would run code that no one can read any more. A finder placed ahead of
the standard ones then loads the core's sources and never its extensions.

`running()` decides when `streams` is imported, before anything imports the core, and says what it
decided for `tribunal --version` and the worker's start-up line.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = "streams.core"
CORE = Path(__file__).resolve().parent / "core"
STAMP = CORE / ".compiled"  # the digest of the sources the extensions were built from
# Not compiled: packages' re-exports, the registry of folds, and what operators read (not on a record's path).
COMPILED = "compiled (mypyc)"
SKIPPED = frozenset({"__init__.py", "folds.py", "view.py"})


def sources(core: Path = CORE) -> list[Path]:
    """The core's modules that mypyc compiles, in a fixed order (the build and the digest agree on it)."""
    return sorted(p for p in core.rglob("*.py") if p.name not in SKIPPED)


def digest(core: Path = CORE) -> str:
    """What the compiled extensions must have been built from: every compiled source's path and bytes."""
    h = hashlib.sha256()
    for path in sources(core):
        h.update(str(path.relative_to(core)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class SourcesOnly(importlib.abc.MetaPathFinder):
    """Finds the core's modules as source files only, so their compiled extensions are never loaded."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        for entry in path or ():
            finder = importlib.machinery.FileFinder(
                entry, (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES))
            spec = finder.find_spec(fullname)
            if spec is not None:
                return spec
        return None


def verdict(pure: bool, stamp: str | None, current: str) -> str:
    """Which core to run: `pure` asked by TRIBUNAL_PURE, `stamp` the digest the build recorded (None: never
    built), `current` the sources' digest now."""
    if pure:
        return "pure Python (TRIBUNAL_PURE=1)"
    if stamp is None:
        return "pure Python (not compiled: `make setup` compiles the core where a C compiler is installed)"
    if stamp != current:
        return "pure Python (streams/core changed since it was compiled: `make setup` compiles it again)"
    return COMPILED


@functools.cache
def running() -> str:
    """Which core this process runs: "compiled (mypyc)", or "pure Python (why)". Decided once, on the first call
    (`import streams` makes it, before anything imports the core): where it is pure Python, a finder placed
    ahead of the standard ones loads the core's sources, never its extensions."""
    pure = os.environ.get("TRIBUNAL_PURE", "") not in ("", "0")
    stamp = STAMP.read_text().strip() if STAMP.exists() else None
    why = verdict(pure, stamp, digest() if stamp is not None and not pure else "")
    if why != COMPILED:
        sys.meta_path.insert(0, SourcesOnly())
        if stamp is not None and not pure:
            print(f"tribunal: the core runs as {why}", file=sys.stderr)
    return why
