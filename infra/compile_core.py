"""Compile the pure core with mypyc, in place: `make setup` runs this (infra/bootstrap.sh) when a C
compiler and Python's headers are installed, and only when the sources changed since the last build.

An extension module lands beside each source (`streams/core/pools/decider.cpython-311-*.so`), with
the runtime they share as `streams/core__mypyc*.so`, and `streams/core/.compiled` records the
digest of the sources they came from: `streams.compiled` runs them only while it still matches.
Run: `.venv/bin/python infra/compile_core.py`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRIBUNAL_PURE"] = "1"  # importing `streams` must not judge the extensions this replaces

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mypyc.build import mypycify  # noqa: E402
from setuptools import setup  # noqa: E402

from streams.compiled import CORE, STAMP, digest, sources  # noqa: E402


def main() -> None:
    os.chdir(ROOT)
    STAMP.unlink(missing_ok=True)  # a failed build leaves the core pure, not half-compiled
    built = digest()
    paths = [str(p.relative_to(ROOT)) for p in sources()]
    extensions = mypycify(["--no-warn-unused-configs", *paths], group_name="streams.core",
                          target_dir=".build/mypyc")
    setup(name="tribunal-core", ext_modules=extensions, script_args=[
        "--quiet", "build_ext", "--inplace", "--build-temp", ".build/mypyc/temp", "--build-lib", ".build/mypyc/lib"])
    STAMP.write_text(built + "\n")
    print(f"[setup] compiled {len(paths)} modules of {CORE.relative_to(ROOT)} with mypyc", file=sys.stderr)


if __name__ == "__main__":
    main()
