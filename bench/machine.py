"""The line every benchmark prints first: which machine its figures come from."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return f"machine: {platform.machine()} {cpu}, {os.cpu_count()} cores; python {platform.python_version()}"
