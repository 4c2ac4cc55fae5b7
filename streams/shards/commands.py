"""`tribunal shards node --command`: each run of a task the node owns is a process, bound to the node.

The command's `{job_set}`, `{task}`, `{epoch}` and `{node}` are filled in, and the same values are in
`TRIBUNAL_JOB_SET`, `TRIBUNAL_TASK`, `TRIBUNAL_EPOCH` (the fencing token: write it with whatever the task
writes) and `TRIBUNAL_NODE`; `TRIBUNAL_HOLDS` names a file that holds the epoch while the node holds the task (a
long task compares it with `TRIBUNAL_EPOCH` before each step, and stops when they differ or the file is gone).
Its output is appended to `<state-dir>/<job set>/<node>/<task>.log`, its exit status goes into the run log.

The processes are started by the node's guardian (`streams.processes.guardian`): they end when the node ends,
however it ends, and a node started again with the same id and state directory first ends whatever an earlier
incarnation left, then registers. A run the node stops (a plan takes the task away, its ZooKeeper session is
suspended or lost, its lease runs out, the node stops) gets SIGTERM, and SIGKILL after `term_grace` seconds or
when the node's lease runs out, whichever comes first (a lease ends before the session can expire on the
server); the node acknowledges a new epoch only once they are gone. The guardian holds the lease too: a node
frozen past it (SIGSTOP, a stalled machine) has its runs SIGKILLed by the guardian when it runs out.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shlex
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from streams.errors import TribunalError
from streams.processes import guardian
from streams.processes.proc import fill

if TYPE_CHECKING:
    from streams.shards.node import Execution

log = logging.getLogger(__name__)


class RunFailed(TribunalError):
    """A task's process exited other than with 0: the run failed, with this exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"exit status {status}")
        self.status = status


class CommandRuns:
    """A node's runs as processes: what `ShardNode` calls for each run, and enters for its own life."""

    def __init__(self, command: str, state_dir: Path, term_grace: float = 10.0) -> None:
        self.template = shlex.split(command)
        if not self.template:
            raise TribunalError("--command is empty")
        self.state_dir, self.term_grace = state_dir.resolve(), term_grace
        self.guardian: guardian.Guardian | None = None
        self.where = self.state_dir
        self.numbers = itertools.count(1)

    def bind(self, job_set: str, node: str) -> None:
        """The node these runs are for: where their logs and holds files go, and whose leftovers are whose."""
        self.job_set, self.node = job_set, node
        self.where = self.state_dir / job_set / node
        self.mark = f"{self.where}"

    async def __aenter__(self) -> CommandRuns:
        (self.where / "holds").mkdir(parents=True, exist_ok=True)
        for stale in (self.where / "holds").iterdir():
            stale.unlink(missing_ok=True)
        self.guardian = await guardian.opened(self.mark, self.node)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        if self.guardian is not None:
            await self.guardian.close()

    async def lease(self, until: float) -> None:
        """The node's lease, extended: the guardian SIGKILLs every run when it runs out (a frozen node)."""
        if self.guardian is not None:
            try:
                await self.guardian.lease(until)
            except guardian.GuardianError as e:
                log.warning("%s: the guardian did not take the lease: %s", self.node, e)

    def grace(self, execution: Execution) -> float:
        """SIGTERM's grace for a run the node stops: `term_grace`, but never past the node's lease, so that a node
        cut off from ZooKeeper has killed its processes before its session can expire and the task move."""
        return min(self.term_grace, max(0.0, execution.node.gate.lease_until - time.monotonic()))

    def holds_file(self, task: int) -> Path:
        return self.where / "holds" / str(task)

    async def __call__(self, execution: Execution) -> int:
        assert self.guardian is not None, "CommandRuns is entered by its node before any run"
        task, epoch = execution.task, execution.epoch
        values = {"job_set": self.job_set, "task": task, "epoch": epoch, "node": self.node}
        argv = [fill(part, **values) for part in self.template]
        holds = self.holds_file(task)
        holds.write_text(f"{epoch}\n")
        env = {**os.environ, "TRIBUNAL_JOB_SET": self.job_set, "TRIBUNAL_TASK": str(task),
               "TRIBUNAL_EPOCH": str(epoch), "TRIBUNAL_NODE": self.node, "TRIBUNAL_HOLDS": str(holds)}
        run = f"{self.node}/{task}/{epoch}/{next(self.numbers)}"
        try:
            proc = await self.guardian.run(argv, env, self.where / f"{task}.log", run)
            try:
                status = await self.guardian.wait(proc)
            except asyncio.CancelledError:  # stopped by the node: the processes go before the run ends
                holds.unlink(missing_ok=True)
                await asyncio.shield(self.guardian.stop(proc, run, self.grace(execution)))
                raise
        finally:
            holds.unlink(missing_ok=True)
        if status != 0:
            raise RunFailed(status)
        return status
