"""Guard of the functional core: nothing in streams/core may reach for I/O, clocks or randomness.

Replay reproduces decisions byte for byte only while this holds, so it is checked on the source
(imports and calls) and on behaviour (the same log gives the same bytes under a different hash seed).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "streams" / "core"
FORBIDDEN_MODULES = {
    "faust", "aiokafka", "kazoo", "mode", "asyncio", "socket", "random", "secrets", "time", "datetime",
    "os", "subprocess", "threading", "uuid", "requests", "aiohttp", "io", "pathlib", "shutil", "tempfile",
    "logging", "streams.infra", "streams.worker", "streams.cli", "streams.clients",
}
FORBIDDEN_CALLS = {"open", "print", "input", "hash", "id", "eval", "exec", "__import__"}


def violations(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES):
                found.append(f"{path.name}:{node.lineno} imports {name}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{path.name}:{node.lineno} calls {node.func.id}()")
    return found


def test_core_sources_import_no_io_clock_or_randomness() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert files, "streams/core has no modules"
    found = [v for f in files for v in violations(f)]
    assert found == []


def test_the_guard_itself_catches_an_impure_module(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom aiokafka import AIOKafkaProducer\nx = open('f')\n")
    assert len(violations(bad)) == 3


SCRIPT = """
import sys
import json
from streams.core import pools
from streams.clients import envelope
from streams.core.source import SourceRecord
from tests.core.pools.builders import seed_policy
state = pools.PoolState()
log = [('policies', json.dumps(seed_policy()).encode()), ('plugin_decider', b'x')]
log += [('plugin_decider', envelope(a, m, 'plugin_decider')) for a, m in [('ats', 75), ('hadoop', 30), ('ats', 90)]]
for i, (topic, v) in enumerate(log):
    state, outs = pools.apply(state, SourceRecord(topic, 0, i, 1, b'p', v), topic)
    for o in outs:
        sys.stdout.buffer.write(o.value_bytes() + b'\\n')
from tests.core.groups.group_log import GroupLog
group = GroupLog()
for sid in 'EDCBA':
    group.register(sid, n=1 + ord(sid) % 3)
group.jobs(12)
for i in range(8):
    group.acquire(f'j{i:03d}', 'ABCDE'[i % 5])
group.send('SchedulerLost', scheduler='B')
for o in group.emitted:
    sys.stdout.buffer.write(o.value_bytes() + b'\\n')
"""


def test_output_bytes_do_not_depend_on_the_hash_seed() -> None:
    def run(seed: str) -> bytes:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, check=True).stdout

    first = run("1")
    assert first.count(b"\n") > 5 + 30
    assert run("2") == first
