"""The dispatcher's client over its REST API: what a tenant runs with a token and no Kafka credentials at all.

The same calls as `DispatcherClient` (the seed's API), made as requests to `tribunal dispatch api`
with `Authorization: Bearer <token>`; the listeners are fed from the worker's event stream
(`streams.dispatcher.events`), which the client follows from the id of the last event it handled:
after a disconnect it reconnects with `Last-Event-ID` and nothing it handled comes again, nothing after
it is lost. With a `cursor_file`, the id is also kept across restarts of the client (written once the
listeners returned, so a start is handed over at least once, and a listener must be idempotent by
(uuid, attempt), as with Kafka).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from pathlib import Path
from typing import Any

from schemas import dispatch as records
from streams.clients import Written
from streams.dispatcher.client import Assigned, JobAssign, Listener, hand_over
from streams.errors import TribunalError

log = logging.getLogger(__name__)
RECONNECT_S = (0.2, 5.0)  # the first wait before reconnecting, and the longest


class ApiError(TribunalError):
    """The API refused a request (its problem's status and detail), or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def client_tls(cafile: Path | None, certfile: Path | None = None, keyfile: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    if certfile is not None:
        context.load_cert_chain(str(certfile), str(keyfile) if keyfile else None)
    return context


class HttpDispatcherClient:
    """`async with HttpDispatcherClient(url, token, "ns", "w1") as client: await client.assign_job(...)`."""

    def __init__(self, url: str, token: str | None, namespace: str, worker: str | None = None,
                 tls: ssl.SSLContext | None = None, cursor_file: Path | None = None) -> None:
        self.url, self.namespace, self.worker, self.tls = url.rstrip("/"), namespace, worker, tls
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.cursor_file = cursor_file
        self.cursor: str | None = None  # the id of the last event handled: where a reconnect resumes
        if cursor_file is not None and cursor_file.exists():
            self.cursor = cursor_file.read_text().strip() or None
        self._on_start: Listener | None = None
        self._on_fail: Listener | None = None
        self._session: Any = None

    async def __aenter__(self) -> HttpDispatcherClient:
        import aiohttp

        self._session = aiohttp.ClientSession(headers=self.headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()

    # -- the seed's API ----------------------------------------------------------------------------
    def on_job_start(self, listener: Listener) -> None:
        self._on_start = listener

    def on_job_fail(self, listener: Listener) -> None:
        self._on_fail = listener

    async def set_max_threads(self, n: int) -> Written:
        return (await self._post("max-threads", {"max": n}))[0]

    async def set_worker_max(self, worker: str, n: int) -> Written:
        return (await self._post(f"workers/{_quoted(worker)}/max", {"max": n}))[0]

    async def assign_job(self, assign: JobAssign) -> Assigned:
        command = assign.build(self.namespace)
        body = command.model_dump(mode="json", include={"worker", "start", "end", "jobs", "request_id"})
        written, answer = await self._post("assignments", body)
        return Assigned(written, list(answer.get("uuids") or ()))

    async def finish_job(self, uuid: str, attempt: int | None = None) -> Written:
        return (await self._post(f"jobs/{_quoted(uuid)}/finish", None, attempt))[0]

    async def fail_job(self, uuid: str, error: str = "", attempt: int | None = None) -> Written:
        return (await self._post(f"jobs/{_quoted(uuid)}/fail", {"error": error}, attempt))[0]

    async def cancel_job(self, uuid: str) -> Written:
        return (await self._post(f"jobs/{_quoted(uuid)}/cancel", None))[0]

    async def _post(self, path: str, body: Any, attempt: int | None = None) -> tuple[Written, dict[str, Any]]:
        import aiohttp

        url = f"{self.url}/namespaces/{_quoted(self.namespace)}/{path}"
        params = {"attempt": str(attempt)} if attempt is not None else None
        try:
            async with self._session.post(url, json=body, params=params, ssl=self.tls) as response:
                answer = await response.json(content_type=None)
                if response.status != 202:
                    raise ApiError(f"{response.status} from {url}: {answer.get('detail', answer)}", response.status)
        except (aiohttp.ClientError, OSError, json.JSONDecodeError) as e:
            raise ApiError(f"cannot reach the dispatcher's API at {self.url}: {e}") from None
        return Written(answer["topic"], answer["partition"], answer["offset"]), answer

    # -- listening ---------------------------------------------------------------------------------
    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Follow the worker's events until cancelled, reconnecting after a disconnect from the last one handled;
        `ready` is set once the first stream is open (starts written after that reach the listeners). A refusal
        (401, 403, 404, 422) ends it with an `ApiError`: waiting would not change it."""
        import aiohttp

        if self.worker is None:
            raise ApiError("an event stream is a worker's: give the client its worker")
        url = f"{self.url}/namespaces/{_quoted(self.namespace)}/workers/{_quoted(self.worker)}/events"
        backoff = RECONNECT_S[0]
        while True:
            headers = {"Last-Event-ID": self.cursor} if self.cursor else {}
            try:
                async with self._session.get(url, headers=headers, ssl=self.tls,
                                             timeout=aiohttp.ClientTimeout(total=None, sock_read=60)) as response:
                    if response.status != 200:
                        problem = await response.json(content_type=None)
                        raise ApiError(f"{response.status} from {url}: {problem.get('detail', problem)}",
                                       response.status)
                    backoff = RECONNECT_S[0]
                    async for kind, ident, data in _events(response.content):
                        if kind == "ready" and ready is not None:
                            ready.set()
                        elif kind in ("JobStarted", "JobFailedFinally"):
                            await self._deliver(kind, data)
                        if ident:
                            self._handled(ident)
            except ApiError as e:
                if e.status is not None and 400 <= e.status < 500 and e.status != 429:
                    raise
                log.warning("%s; reconnecting in %.1f s", e, backoff)
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                log.warning("the event stream from %s broke (%s); reconnecting in %.1f s from %s", url,
                            type(e).__name__, backoff, self.cursor)
            await asyncio.sleep(backoff)
            backoff = min(RECONNECT_S[1], backoff * 2)

    def _handled(self, ident: str) -> None:
        self.cursor = ident
        if self.cursor_file is not None:
            new = self.cursor_file.with_suffix(".new")
            new.write_text(ident + "\n")
            new.replace(self.cursor_file)

    async def _deliver(self, kind: str, data: str) -> None:
        try:
            value = json.loads(data)
            record: Any = records.JobStarted.model_validate(value) if kind == "JobStarted" else \
                records.JobOutcome.model_validate(value)
        except ValueError as e:  # pydantic's ValidationError and JSON's error alike
            log.warning("skipped an event that is not a %s: %s", kind, e)
            return
        listener = self._on_start if kind == "JobStarted" else self._on_fail
        if listener is not None:
            await hand_over(listener, record)


async def _events(content: Any) -> Any:
    """(event, id, data) for each server-sent event of a stream (comments skipped)."""
    kind, ident, data = "message", "", list[str]()
    async for raw in content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data or kind != "message":
                yield kind, ident, "\n".join(data)
            kind, ident, data = "message", "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)


def _quoted(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")
