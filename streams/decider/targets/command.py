"""The `exec` target: a command per app changed (`kubectl scale deploy/{app} --replicas={instances}`, a cloud
CLI, a script), with a time limit.

The template is split as a shell would (`shlex`), then `{pool}`, `{app}`, `{instances}` and `{seq}` are filled
in each argument: no shell runs it, so an app's name cannot inject one; other braces stay as written. A
non-zero exit, or no exit within the timeout (the command is killed), fails that app's change: the actuator
retries it and counts it. With an observe
command (the same placeholders but `{instances}`), what it prints is the app's running count; without one the
target cannot see what runs, and the actuator trusts what it last applied.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Collection, Mapping

from streams.decider.targets import ActuationFailed, Change
from streams.processes.proc import fill

log = logging.getLogger(__name__)


class CommandTarget:
    name = "exec"

    def __init__(self, template: str, observe_template: str | None = None, timeout: float = 30.0) -> None:
        self.template, self.observe_template, self.timeout = shlex.split(template), observe_template, timeout

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        if self.observe_template is None:
            return {}
        seen = {}
        for app in sorted(apps):
            code, out, err = await self._run(shlex.split(self.observe_template), pool=pool, app=app)
            try:
                if code == 0:
                    seen[app] = int(out.strip())
                    continue
            except ValueError:
                pass
            log.warning("cannot observe %s/%s: exit %s, %r", pool, app, code, (err or out)[-200:])
        return seen

    async def apply(self, change: Change) -> None:
        failed = {}
        for app, n in sorted(change.instances.items()):
            code, out, err = await self._run(self.template, pool=change.pool, app=app, instances=n, seq=change.seq)
            if code != 0:
                failed[app] = f"exit {code}: {(err or out).strip()[-300:]}" if code is not None else "timed out"
        if failed:
            raise ActuationFailed("; ".join(f"{app}: {why}" for app, why in sorted(failed.items())), failed)

    async def _run(self, template: list[str], **values: object) -> tuple[int | None, str, str]:
        """Run the template with `values` filled in: (exit status or None when it timed out, stdout, stderr)."""
        argv = [fill(part, **values) for part in template]
        try:
            process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.PIPE)
        except OSError as e:
            return 127, "", str(e)
        try:
            out, err = await asyncio.wait_for(process.communicate(), self.timeout)
        except TimeoutError:
            return None, "", ""
        finally:
            if process.returncode is None:  # timed out, or the actuator stopping: no command is left behind
                process.kill()
                await asyncio.shield(process.wait())
        return process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    async def close(self) -> None:
        return None
