"""Named steps of the worker's flush where a test can have the process die, to prove what a crash there leaves.

A crash at a random moment (tests/worker/test_crash.py) lands mostly where the worker spends its time, folding
or waiting; a flush's short steps between two round trips are hit by luck. So each step of a flush names
itself with `reach`, and `TRIBUNAL_FAILPOINT=STEP:N` has the process SIGKILL itself the N-th time any source
partition's flush reaches STEP (tests/worker/test_flush_steps.py): no handler runs, no buffer is flushed, exactly
as a `kill -9` from outside. Unset (always, outside such a test), `reach` is one comparison.
"""

from __future__ import annotations

import os
import signal

ENV = "TRIBUNAL_FAILPOINT"

STEPS = ("taken", "sent", "acknowledged", "offsets", "committed")
"""A source partition's flush under exactly-once (`Checkpoint._commit_each`), in order: its states dumped into the
local store (`taken`), its records handed to the transactional producer (`sent`), acknowledged by the broker
(`acknowledged`), its input offsets added to the transaction (`offsets`), the transaction committed, before the
next one begins (`committed`)."""


def _armed(value: str | None) -> tuple[str, int] | None:
    if not value:
        return None
    step, _, count = value.partition(":")
    if step not in STEPS or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{ENV}={value!r}: expected STEP:N, STEP one of {', '.join(STEPS)} and N >= 1")
    return step, int(count)


_ARMED = _armed(os.environ.get(ENV))
_passes = 0


def reach(step: str) -> None:
    """A flush is at `step`: die here if this is the pass `TRIBUNAL_FAILPOINT` names."""
    global _passes
    if _ARMED is None or _ARMED[0] != step:
        return
    _passes += 1
    if _passes == _ARMED[1]:
        os.kill(os.getpid(), signal.SIGKILL)
