"""`tribunal shards processes`: an operator's look at what runs of a state directory live, orphans named (issue 47).

A stand-in node (`tests.processes.guarded`) is frozen and its guardian SIGKILLed: what its runs spawned is left
with no guardian (the frozen node cannot sweep it); the command lists it as an orphan and exits 1. Thawed, the
node ends it as it starts another guardian, and the command finds none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import tribunal, until
from tests.processes.test_guardian import FAMILY, ROOT, marked


def test_orphans_are_listed_while_nobody_ends_them_and_none_once_the_node_did(tmp_path: Path) -> None:
    mark = str(tmp_path.resolve() / "js" / "n1")
    node = subprocess.Popen([sys.executable, "-m", "tests.processes.guarded", mark, str(tmp_path), *FAMILY],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert node.stdout is not None
        guardian = int(json.loads(node.stdout.readline())["guardian"])
        until(lambda: len(marked(mark)) >= 7, "the family running", timeout=10)
        listed = tribunal("shards", "processes", "--state-dir", str(tmp_path))
        lines = [line.split(maxsplit=4) for line in listed.stdout.splitlines()]  # a line a run
        assert [(whose, run, state) for whose, run, state, _, _ in lines] == [
            ("js/n1", f"run{i}", "guarded") for i in range(len(FAMILY))], lines
        assert sorted(int(pid) for *_, pids, _ in lines for pid in pids.split(",")) == sorted(marked(mark))
        assert tribunal("shards", "processes", "--state-dir", str(tmp_path), "--orphans").stdout == ""

        os.kill(node.pid, signal.SIGSTOP)
        os.kill(guardian, signal.SIGKILL)
        until(lambda: tribunal("shards", "processes", "--state-dir", str(tmp_path), "--orphans", check=False).returncode
              == 1, "orphans listed", timeout=10)
        orphans = tribunal("shards", "processes", "--state-dir", str(tmp_path), "--orphans", check=False).stdout
        assert orphans and all(" ORPHAN " in line for line in orphans.splitlines()), orphans
        os.kill(node.pid, signal.SIGCONT)
        until(lambda: tribunal("shards", "processes", "--state-dir", str(tmp_path), "--orphans", check=False).returncode
              == 0, "the node's sweep", timeout=10)
    finally:
        os.kill(node.pid, signal.SIGCONT)
        node.kill()
        node.wait()
    until(lambda: not marked(mark), "nothing left", timeout=10)
