"""`TRIBUNAL_FAILPOINT` (streams/worker/failpoints.py): a process dies at exactly the pass it names, and a value
that names no step is refused rather than never firing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streams.worker import failpoints

PASSES = "from streams.worker import failpoints\nfor i in range(5):\n    failpoints.reach('offsets')\n" \
         "    failpoints.reach('sent')\n    print(i, flush=True)\n"


def run(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != failpoints.ENV}
    if value is not None:
        env[failpoints.ENV] = value
    return subprocess.run([sys.executable, "-c", PASSES], env=env, capture_output=True, text=True, timeout=60)


def test_the_named_pass_of_the_named_step_kills_the_process() -> None:
    killed = run("sent:3")
    assert killed.returncode == -9 and killed.stdout.split() == ["0", "1"]
    assert run(None).stdout.split() == ["0", "1", "2", "3", "4"]
    assert run("committed:1").returncode == 0  # a step never reached never fires


@pytest.mark.parametrize("value", ["sent", "sent:0", "sent:x", "nowhere:1"])
def test_a_value_naming_no_step_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=failpoints.ENV):
        failpoints._armed(value)
