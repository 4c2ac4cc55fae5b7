"""`tribunal executor`: a demo tenant that runs the jobs the dispatcher starts for its worker.

Each job "runs" for a few seconds (a sleep) and is then finished, or every k-th attempt failed,
through the client, so the dispatcher frees its slot and starts the next. A start seen twice (the
client delivers at least once) runs once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import IO, Any

from schemas.dispatch import JobStarted
from streams.dispatcher.client import DispatcherClient
from streams.settings import Settings

log = logging.getLogger(__name__)


class Executor:
    def __init__(self, settings: Settings, namespace: str, worker: str, seconds: float = 1.0, fail_every: int = 0,
                 run_log: IO[str] | None = None) -> None:
        self.settings, self.namespace, self.worker = settings, namespace, worker
        self.seconds, self.fail_every, self.run_log = seconds, fail_every, run_log
        self.seen: set[tuple[str, int]] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.attempts = 0

    def _log(self, event: str, job: JobStarted, **more: Any) -> None:
        if self.run_log is not None:
            self.run_log.write(json.dumps({"event": event, "uuid": job.uuid, "external_id": job.external_id,
                                           "attempt": job.attempt, "at": int(time.time() * 1000), **more}) + "\n")
            self.run_log.flush()

    async def _run(self, client: DispatcherClient, job: JobStarted) -> None:
        self._log("start", job)
        await asyncio.sleep(self.seconds)
        self.attempts += 1
        if self.fail_every and self.attempts % self.fail_every == 0:
            await client.fail_job(job.uuid, f"demo failure of attempt {job.attempt}", attempt=job.attempt)
            self._log("fail", job)
        else:
            await client.finish_job(job.uuid, attempt=job.attempt)
            self._log("finish", job)

    async def run(self) -> None:
        group = f"{self.settings.app_id}-executor-{self.namespace}-{self.worker}"
        async with DispatcherClient(self.settings, self.namespace, {self.worker}, group_id=group) as client:
            def started(job: JobStarted) -> None:
                if (job.uuid, job.attempt) in self.seen:
                    return
                self.seen.add((job.uuid, job.attempt))
                task = asyncio.create_task(self._run(client, job))
                self.tasks.add(task)
                task.add_done_callback(self._done)

            client.on_job_start(started)
            client.on_job_fail(lambda outcome: log.warning("job %s failed for good: %s", outcome.uuid, outcome.error))
            log.info("executor for %s/%s running jobs of %.1f s", self.namespace, self.worker, self.seconds)
            try:
                await client.run()  # until cancelled, or the broker goes away (the executor stops with its error)
            finally:
                await asyncio.gather(*self.tasks, return_exceptions=True)  # the jobs under way report their end

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the job stays running until its timeout
            log.error("reporting a job's end failed: %r", task.exception())
