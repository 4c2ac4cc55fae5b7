"""`tribunal dispatch executor`: a tenant that runs the jobs the dispatcher starts for its worker.

With a command, each started job is a process (`{namespace}`, `{uuid}`, `{attempt}`, `{external_id}` and
`{info}`, the job's payload, filled in; the same in `TRIBUNAL_NAMESPACE`, `TRIBUNAL_JOB`, `TRIBUNAL_ATTEMPT`,
`TRIBUNAL_EXTERNAL_ID`, `TRIBUNAL_JOB_INFO`), started by the executor's guardian so that it ends with the
executor, however that ends (`streams.processes.guardian`). Exit 0 finishes the job with its attempt, any other
exit fails it; one that outlives the attempt's deadline is stopped (SIGTERM, SIGKILL after a grace) and failed
as timed out. Without one, a job "runs" for a few seconds (a sleep), the demo. Either way a start seen twice
(the client delivers at least once) runs once, and every k-th attempt may be failed on purpose (`fail_every`).

Its starts and reports go through Kafka (`DispatcherClient`, as the tenant's Kafka principal) or, given a
`connect` that makes an `HttpDispatcherClient`, through the dispatcher's API with a token and no Kafka
credentials at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from schemas.dispatch import JobStarted
from streams.dispatcher.client import DispatcherClient
from streams.processes import guardian
from streams.processes.proc import fill
from streams.settings import Settings

log = logging.getLogger(__name__)


class Executor:
    def __init__(self, settings: Settings, namespace: str, worker: str, seconds: float = 1.0, fail_every: int = 0,
                 run_log: IO[str] | None = None, command: str | None = None,
                 state_dir: Path = Path(".tribunal-executor"), term_grace: float = 10.0,
                 connect: Callable[[Path], Any] | None = None) -> None:
        self.settings, self.namespace, self.worker = settings, namespace, worker
        self.seconds, self.fail_every, self.run_log = seconds, fail_every, run_log
        self.template = shlex.split(command) if command else None
        self.where, self.term_grace = state_dir.resolve() / namespace / worker, term_grace
        self.guardian: guardian.Guardian | None = None
        self.seen: set[tuple[str, int]] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.attempts = 0
        self.connect = connect  # the API's client, handed where to keep its cursor; None: Kafka

    def _log(self, event: str, job: JobStarted, **more: Any) -> None:
        if self.run_log is not None:
            self.run_log.write(json.dumps({"event": event, "uuid": job.uuid, "external_id": job.external_id,
                                           "attempt": job.attempt, "at": int(time.time() * 1000), **more}) + "\n")
            self.run_log.flush()

    async def _run(self, client: Any, job: JobStarted) -> None:
        self._log("start", job)
        failure = None
        if self.template is not None:
            failure = await self._process(job)
        else:
            await asyncio.sleep(self.seconds)
        self.attempts += 1
        if failure is None and self.fail_every and self.attempts % self.fail_every == 0:
            failure = f"demo failure of attempt {job.attempt}"
        if failure is not None:
            await client.fail_job(job.uuid, failure, attempt=job.attempt)
            self._log("fail", job, error=failure)
        else:
            await client.finish_job(job.uuid, attempt=job.attempt)
            self._log("finish", job)

    async def _process(self, job: JobStarted) -> str | None:
        """The job as a process, until it exits or its deadline comes: None if it exited 0, else why it failed."""
        assert self.guardian is not None and self.template is not None
        values = {"namespace": self.namespace, "uuid": job.uuid, "attempt": job.attempt,
                  "external_id": job.external_id, "info": job.info}
        env = {**os.environ, "TRIBUNAL_NAMESPACE": self.namespace, "TRIBUNAL_JOB": job.uuid,
               "TRIBUNAL_ATTEMPT": str(job.attempt), "TRIBUNAL_EXTERNAL_ID": job.external_id,
               "TRIBUNAL_JOB_INFO": job.info}
        run = f"{job.uuid}/{job.attempt}"
        try:
            proc = await self.guardian.run([fill(part, **values) for part in self.template], env,
                                           self.where / f"{job.uuid}.log", run)
        except guardian.GuardianError as e:  # a command that cannot start, a guardian gone
            return str(e)
        left = max(0.0, job.deadline / 1000 - time.time())
        try:
            status = await asyncio.wait_for(self.guardian.wait(proc), left)
        except TimeoutError:
            await self.guardian.stop(proc, run, self.term_grace)
            return f"timed out: still running at its deadline ({job.deadline} ms)"
        except asyncio.CancelledError:  # the executor stopping: the job's processes go with it
            await asyncio.shield(self.guardian.stop(proc, run, self.term_grace))
            raise
        return None if status == 0 else f"exit status {status}"

    async def run(self) -> None:
        if self.template is None:
            await self._serve()
            return
        self.guardian = await guardian.opened(str(self.where), f"executor {self.namespace}/{self.worker}")
        try:
            await self._serve()
        finally:
            await self.guardian.close()

    async def _serve(self) -> None:
        group = f"{self.settings.app_id}-executor-{self.namespace}-{self.worker}"
        if self.connect is not None:  # where the API's event stream was last handled: a restart resumes there
            self.where.mkdir(parents=True, exist_ok=True)
            made = self.connect(self.where / "events.cursor")
        else:
            made = DispatcherClient(self.settings, self.namespace, {self.worker}, group_id=group)
        async with made as client:
            def started(job: JobStarted) -> None:
                if (job.uuid, job.attempt) in self.seen:
                    return
                self.seen.add((job.uuid, job.attempt))
                task = asyncio.create_task(self._run(client, job))
                self.tasks.add(task)
                task.add_done_callback(self._done)

            client.on_job_start(started)
            client.on_job_fail(lambda outcome: log.warning("job %s failed for good: %s", outcome.uuid, outcome.error))
            log.info("executor for %s/%s running %s", self.namespace, self.worker,
                     f"{shlex.join(self.template)!r} per job" if self.template else f"jobs of {self.seconds:.1f} s")
            try:
                await client.run()  # until cancelled, or the broker goes away (the executor stops with its error)
            finally:  # the jobs under way report their end; a process of one is stopped (its attempt times out)
                if self.template is not None:
                    for task in self.tasks:
                        task.cancel()
                await asyncio.gather(*self.tasks, return_exceptions=True)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the job stays running until its timeout
            log.error("reporting a job's end failed: %r", task.exception())
