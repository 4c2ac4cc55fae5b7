"""A node's guardian: the small process that starts a node's task processes and ends every one of them when the
node ends, however it ends (seed 003's orphans: SIGKILL and the OOM killer included).

The node starts it (`python -m streams.processes.guardian`) in a session of its own and talks to it over a pipe:
each run is a request on the guardian's stdin, answered with the process's pid and start time, and its exit
status later. What holds, and why:

* The guardian is a **child subreaper** (`PR_SET_CHILD_SUBREAPER`): whatever a task's process spawns and leaves
  (a script's own children, a double fork, a `setsid`) is re-parented to it, never to init, so it stays below it.
* The node's end closes the pipe, whatever ended the node: the guardian reads end-of-file, SIGKILLs every
  process below it, reaps them, and exits, within milliseconds. Its own `PR_SET_PDEATHSIG` (SIGTERM) says the
  same should the pipe be held open elsewhere.
* Each task's own process has `PR_SET_PDEATHSIG` SIGKILL: should the guardian itself be SIGKILLed, the task's
  process dies with it, and its runs fail; what that process spawned is re-parented to init, and the node finds
  it by its environment and ends it (`sweep`) as it starts another guardian, at once; a node started again with
  the same state directory does the same before it registers.
* Every process of a run carries `TRIBUNAL_RUN` and `TRIBUNAL_GUARDIAN` in its environment, so that a run is
  stopped whole (its process group, and whatever of it left the group) and a leftover is known for what it is.
* A node that holds its tasks on a lease (a shard node: its last answer from ZooKeeper, plus a share of the
  session) tells the guardian each time the lease is extended; when it runs out unextended, the guardian SIGKILLs
  every run. A node that is frozen (SIGSTOP, a stalled machine) cannot stop its runs itself, and its session
  expires on the server after the lease ends: its tasks' processes are gone before another node may be given them.

What a task's command must not do to escape: have another process start its work (systemd-run, at, a
container runtime, a daemon it talks to), or clear its environment and leave its session and the guardian's
descendants at once (only possible through such a process). Linux only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from streams.errors import TribunalError
from streams.processes.proc import Proc, start_time

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
RUN, GUARDIAN, KEEPER = "TRIBUNAL_RUN", "TRIBUNAL_GUARDIAN", "TRIBUNAL_GUARDIAN_PROCESS"


class GuardianError(TribunalError):
    """The guardian could not start a process, or cannot protect any here."""


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def protections() -> list[str]:
    """What holds on this machine, said as the node says it at start (empty: nothing does, and `--command` is
    refused)."""
    if not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists():
        return []
    held = ["a guardian process per node, child subreaper: a task's processes and whatever they spawn end when "
            "the node does, SIGKILL included" if _subreaper_possible() else
            "no child subreaper (old kernel): a double fork may outlive its node"]
    held.append("PR_SET_PDEATHSIG on each task's process: it dies with the guardian")
    held.append("leftovers of an earlier incarnation found by their environment at start and ended")
    return held


def _subreaper_possible() -> bool:
    """Whether this kernel knows PR_SET_CHILD_SUBREAPER (3.4 on), asked of a throwaway child."""
    child = subprocess.run([sys.executable, "-c", "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
                            f"sys.exit(libc.prctl({PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0) != 0)"], check=False)
    return child.returncode == 0


# -- the node's side --------------------------------------------------------------------------------------------

class Guardian:
    """The node's handle on its guardian: start runs, wait for their ends, stop them whole.

    A run is known by the ticket its start request had, never by its pid (a pid comes round again)."""

    def __init__(self, mark: str, who: str = "") -> None:
        self.mark = mark  # in every run's environment (`TRIBUNAL_GUARDIAN`): whose runs these are
        self.who = who or mark  # the node or executor it serves, as its log lines name it
        self.closing = False
        self.restarting: asyncio.Task[None] | None = None
        self.leased: float | None = None  # the node's lease, as last told
        self.process: asyncio.subprocess.Process | None = None
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.exits: dict[int, asyncio.Future[int]] = {}  # a run's ticket -> its exit status
        self.numbers = itertools.count(1)
        self.reader: asyncio.Task[None] | None = None
        self.keeper = ""  # the guardian's own pid and start time, in every run's environment (`sweep`)

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streams.processes.guardian", str(os.getpid()), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, start_new_session=True)
        assert self.process.stdout is not None
        ready = json.loads(await self.process.stdout.readline() or b"{}")
        if not ready.get("ready"):
            raise GuardianError("the guardian process did not start")
        self.keeper = f"{self.process.pid}:{start_time(self.process.pid)}"
        self.reader = asyncio.create_task(self._read())

    def _future(self, table: dict[int, asyncio.Future[Any]], ticket: int) -> asyncio.Future[Any]:
        if ticket not in table:
            table[ticket] = asyncio.get_running_loop().create_future()
        return table[ticket]

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                said = json.loads(line)
                future: asyncio.Future[Any] | None = self._future(self.exits, said["ticket"]) if "exit" in said \
                    else self.replies.pop(said.get("id", -1), None)
                if future is None or future.done():
                    continue  # a reply its asker stopped waiting for
                future.set_result(int(said["exit"]) if "exit" in said else said)
        finally:
            ended = GuardianError("the guardian process ended")
            waiting: list[asyncio.Future[Any]] = [*self.replies.values(), *self.exits.values()]
            self.replies.clear()
            for left in waiting:
                if not left.done():
                    left.set_exception(ended)
                    left.exception()  # retrieved: only an awaiting caller hears of it
            if not self.closing:  # it ended on its own (killed alone): what its runs left is ended, another started
                self.restarting = asyncio.ensure_future(self._restart())

    @property
    def running(self) -> bool:
        return self.reader is not None and not self.reader.done()

    async def _restart(self) -> None:
        log.warning("%s: the guardian process ended on its own: its runs failed; ending what they left and starting "
                    "another", self.who)
        if left := await asyncio.to_thread(sweep, self.mark):
            log.warning("%s: ended %d process(es) the guardian's runs left: %s", self.who, len(left), left)
        if not self.closing:
            await self.start()
            if self.leased is not None:
                await self._ask({"op": "lease", "until": self.leased})

    async def ready(self) -> None:
        """Until a guardian runs (one that ended on its own is being started again)."""
        if not self.running and self.restarting is not None:
            await asyncio.shield(self.restarting)

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin is not None
        number = next(self.numbers)
        reply = self._future(self.replies, number)
        try:
            self.process.stdin.write(json.dumps({**request, "id": number}).encode() + b"\n")
            await self.process.stdin.drain()
        except (ConnectionError, RuntimeError) as e:  # its pipe closed: it is gone
            self.replies.pop(number, None)
            raise GuardianError(f"the guardian process is gone: {e!r}") from None
        return await reply

    async def run(self, argv: Sequence[str], env: Mapping[str, str], output: Path, run: str) -> Proc:
        """Start `argv` as run `run` (its processes carry `TRIBUNAL_RUN=run`), its output appended to `output`."""
        await self.ready()
        env = {**env, RUN: run, GUARDIAN: self.mark, KEEPER: self.keeper}
        asking = asyncio.ensure_future(self._ask({"op": "run", "argv": list(argv), "env": env,
                                                   "output": str(output)}))
        try:
            said = await asyncio.shield(asking)
        except asyncio.CancelledError:  # the caller gave up: what starts meanwhile is stopped as it starts
            asking.add_done_callback(lambda done: self._abandoned(done, run))
            raise
        if "error" in said:
            raise GuardianError(f"cannot start {argv[0]!r}: {said['error']}")
        self._future(self.exits, said["id"])
        return Proc(said["pid"], said["started"], None, time.monotonic(), ticket=said["id"])

    def _abandoned(self, asking: asyncio.Future[dict[str, Any]], run: str) -> None:
        if asking.cancelled() or asking.exception() is not None or "error" in asking.result():
            return
        said = asking.result()
        stopping = asyncio.ensure_future(self._ask({"op": "stop", "pid": said["pid"], "run": run, "grace": 0}))
        stopping.add_done_callback(lambda done: done.cancelled() or done.exception())
        self.exits.pop(said["id"], None)

    async def wait(self, proc: Proc) -> int:
        """The run's exit status (negative: the signal that ended it)."""
        code: int = await asyncio.shield(self._future(self.exits, proc.ticket))
        self.exits.pop(proc.ticket, None)
        proc.code = code
        return code

    async def stop(self, proc: Proc, run: str, grace: float) -> int:
        """SIGTERM to the run's processes (its group, and any of it that left the group), SIGKILL after `grace`;
        return once its own process is gone, with its exit status."""
        if proc.code is not None:
            return proc.code
        await self._ask({"op": "stop", "pid": proc.pid, "run": run, "grace": grace})
        return await self.wait(proc)

    async def lease(self, until: float) -> None:
        """Every run is SIGKILLed at `until` (`time.monotonic()`, the machine's monotonic clock) unless a later
        lease comes first."""
        self.leased = until
        await self.ready()
        await self._ask({"op": "lease", "until": until})

    async def close(self) -> None:
        """End every run and the guardian (what the node's death does, done on purpose)."""
        self.closing = True
        if self.restarting is not None:
            await asyncio.gather(self.restarting, return_exceptions=True)
        if self.process is None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            await self.process.wait()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)


async def opened(mark: str, who: str) -> Guardian:
    """A started guardian for `who` (a node, an executor): refused where nothing here could bind its processes to
    it, the protections that hold logged, and whatever an earlier incarnation with this `mark` left ended first."""
    held = protections()
    if not held:
        raise GuardianError("--command needs Linux (/proc, prctl): nothing here could end a command's processes "
                            f"with {who}")
    for protection in held:
        log.info("%s: %s", who, protection)
    if left := await asyncio.to_thread(sweep, mark):
        log.warning("%s: ended %d process(es) an earlier incarnation left running: %s", who, len(left), left)
    guardian = Guardian(mark, who)
    await guardian.start()
    return guardian


@dataclass(frozen=True)
class Found:
    """A live process of a run, as its environment tells: whose guardian (`mark`), which run, and whether that
    guardian still runs (if not, it is an orphan: what `sweep` ends)."""

    pid: int
    mark: str
    run: str
    guarded: bool
    command: str
    process: psutil.Process = field(repr=False, compare=False)  # signalled as itself: psutil checks its start


def found(under: str) -> list[Found]:
    """Every live process of a run of a guardian whose mark is `under` or a path below it (a state directory holds
    every node's and executor's marks), read from /proc: by environment, so a reused pid is never taken for one."""
    out = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            env = process.environ()
            mark = env.get(GUARDIAN)
            if mark is None or process.pid == os.getpid() or not (mark == under or mark.startswith(under + "/")):
                continue
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            out.append(Found(process.pid, mark, env.get(RUN, ""), _alive(env.get(KEEPER, "")),
                             " ".join(process.cmdline()), process))
    return out


def sweep(mark: str) -> list[int]:
    """SIGKILL every process whose environment says it is a run of guardian `mark` and whose guardian is gone (an
    earlier incarnation's leftovers; a live guardian's runs, a second process with the same mark, are left
    alone); the pids killed."""
    killed = []
    for process in found(mark):
        if process.mark == mark and not process.guarded:
            with contextlib.suppress(psutil.Error):
                process.process.kill()
                killed.append(process.pid)
    return killed


def _alive(keeper: str) -> bool:
    """Whether the guardian `pid:start time` still runs (not another process that has its pid now)."""
    pid, _, started = keeper.partition(":")
    return pid.isdigit() and str(start_time(int(pid))) == started


# -- the guardian's side ------------------------------------------------------------------------------------------

class _Keeper:
    """The guardian process: starts runs, reports their ends, stops them on request, ends all when told.

    A run ends whole: when its own process exits, whatever of it is left (its group, and any of it that left the
    group) is SIGKILLed, so nothing of a finished run outlives it on the node."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.runs: dict[int, tuple[str, Proc, int]] = {}  # pid of a run's own process -> the run, it (its `Popen`
        # kept: one dropped while its process runs would be reaped by `subprocess` itself, its status lost), ticket
        self.stopping: dict[int, float] = {}  # pid -> when to SIGKILL
        self.fenced: set[int] = set()  # pids of runs SIGKILLed at the lease's end
        self.lease = float("inf")  # monotonic: every run is SIGKILLed then (the node's lease, if it has one)
        self.ending = False

    def serve(self) -> None:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._end)
        woken, wake = os.pipe()  # a child's exit (SIGCHLD) wakes the loop at once, through this pipe
        os.set_blocking(woken, False)
        os.set_blocking(wake, False)
        signal.set_wakeup_fd(wake)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        try:
            self._say({"ready": True, "pid": os.getpid()})
            stdin = sys.stdin.buffer
            pending = b""
            while not self.ending and os.getppid() == self.parent:
                readable, _, _ = select.select([stdin, woken], [], [], 0.05)
                if woken in readable:
                    with contextlib.suppress(BlockingIOError):
                        os.read(woken, 4096)
                if stdin in readable:
                    chunk = os.read(stdin.fileno(), 65536)
                    if not chunk:
                        break  # the node is gone (or closed us on purpose)
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        self._handle(line)
                self._reap()
                self._escalate()
                self._fence()
        finally:
            self._end_all()

    def _end(self, signum: int, frame: Any) -> None:
        self.ending = True

    def _say(self, what: dict[str, Any]) -> None:
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.write(json.dumps(what) + "\n")
            sys.stdout.flush()

    def _handle(self, line: bytes) -> None:
        try:
            request = json.loads(line)
            number = request["id"]
        except (ValueError, KeyError, TypeError):
            return  # not a request of the node's
        if request.get("op") == "run":
            try:
                proc = _start(request["argv"], request["env"], Path(request["output"]))
            except Exception as e:  # noqa: BLE001  (a command that cannot start: the node hears why)
                self._say({"id": number, "error": str(e)})
                return
            self.runs[proc.pid] = (request["env"][RUN], proc, number)
            self._say({"id": number, "pid": proc.pid, "started": proc.started})
        elif request.get("op") == "stop":
            pid, run = int(request["pid"]), str(request["run"])
            if pid in self.runs:
                self._signal_run(pid, run, signal.SIGTERM)
                self.stopping[pid] = time.monotonic() + float(request["grace"])
            else:  # it ended already: only what it left could remain
                self._signal_run(None, run, signal.SIGKILL)
            self._say({"id": number, "stopping": pid})
        elif request.get("op") == "lease":
            self.lease = float(request["until"])
            self._say({"id": number, "lease": self.lease})

    def _signal_run(self, pid: int | None, run: str, sig: int) -> None:
        """`sig` to the run's group (led by `pid`, ours and not reaped yet) and every process of the run below."""
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
        for other in _below(os.getpid()):
            if _environ(other).get(RUN) == run:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(other, sig)

    def _escalate(self) -> None:
        now = time.monotonic()
        for pid, deadline in list(self.stopping.items()):
            if now >= deadline and pid in self.runs:
                self._signal_run(pid, self.runs[pid][0], signal.SIGKILL)
                del self.stopping[pid]

    def _fence(self) -> None:
        """The node's lease ran out unextended: it may be frozen, its tasks about to be given to other nodes."""
        if self.runs and time.monotonic() >= self.lease:
            for pid, (run, _, _) in list(self.runs.items()):
                if pid not in self.fenced:
                    self._signal_run(pid, run, signal.SIGKILL)
                    self.fenced.add(pid)

    def _reap(self) -> None:
        for pid, (_, proc, _) in list(self.runs.items()):
            code = proc.child.poll() if proc.child is not None else None
            if code is not None:
                self._ended(pid, code)
        while True:  # the rest: processes of runs re-parented to the guardian (its subreaper's harvest)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.runs:
                self._ended(pid, os.waitstatus_to_exitcode(status))

    def _ended(self, pid: int, code: int) -> None:
        run, _, ticket = self.runs.pop(pid)
        self.stopping.pop(pid, None)
        self.fenced.discard(pid)
        self._signal_run(None, run, signal.SIGKILL)  # what of the run is left goes with it
        self._say({"ticket": ticket, "pid": pid, "exit": code})

    def _end_all(self) -> None:
        """SIGKILL everything below the guardian until nothing is, reaping as it goes."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            below = _below(os.getpid())
            if not below:
                break
            for pid in below:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
            self._reap()
        self._reap()


def _start(argv: list[str], env: dict[str, str], output: Path) -> Proc:
    from streams.processes.proc import spawn

    guardian = os.getpid()

    def bound() -> None:  # in the child, before exec: it dies with the guardian (and not after, if it died before)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != guardian:
            os.kill(os.getpid(), signal.SIGKILL)

    return spawn(argv, env, output, preexec=bound)


def _below(pid: int) -> list[int]:
    """Every process below `pid` (its descendants)."""
    with contextlib.suppress(psutil.Error):
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    return []


def _environ(pid: int) -> dict[str, str]:
    with contextlib.suppress(psutil.Error):
        return dict(psutil.Process(pid).environ())
    return {}


if __name__ == "__main__":
    _Keeper(int(sys.argv[1])).serve()
