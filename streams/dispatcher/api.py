"""`tribunal dispatch api`: the dispatcher's REST API (aiohttp, as the worker's own web server).

Writes become records on `dispatch-commands` through `DispatcherClient` and answer 202 with the
record's coordinates once the broker has it (the worker decides when it folds it: watch
`job-starts` and `job-outcomes`, or read the job back). Reads come from the worker's tables, through
its state pages (any worker answers: Faust forwards to the one holding the namespace). A worker's
starts are a stream of server-sent events, resumable at the last one handled (`events`). Errors are
RFC 9457 problem bodies: 422 for a body or parameter that does not validate, 404 for an unknown
namespace, job or path, 503 when Kafka or the worker does not answer. The OpenAPI document is
`schemas.dispatch_api.openapi()`, served at /openapi.json.

With an auth file every request but the OpenAPI document's names an identity (`guard`), which the
route's role check (`auth.may`) lets through or refuses before anything is written, and every command
written names it as its `principal`: 401 without a valid identity, 403 for one that may not, 404 for a
tenant asking after another worker's job (a 403 would say that the job exists), 429 past the identity's
rate, 413 past the body limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from schemas import dispatch as records
from schemas.dispatch import MAX_RETRIES
from schemas.dispatch_api import ATTEMPT_QUERY, AssignBody, CapBody, FailBody, Problem, Written, openapi
from streams.clients import worker_page
from streams.dispatcher import events
from streams.dispatcher.auth import Identity, Keyring, Verb, may
from streams.dispatcher.client import DispatcherClient, uuids_of
from streams.dispatcher.guard import Rates, Unauthenticated, identify
from streams.errors import NotFound, TribunalError
from streams.settings import Settings

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def problem(status: int, title: str, detail: str, errors: list[dict[str, Any]] | None = None) -> web.Response:
    body = Problem(title=title, status=status, detail=detail, errors=errors).model_dump(exclude_none=True)
    return web.Response(status=status, text=json.dumps(body), content_type="application/problem+json")


def invalid(error: ValidationError) -> web.Response:
    errors = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in error.errors(include_url=False)]
    detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in errors)
    return problem(422, "Unprocessable Content", detail, errors)


def _counters() -> tuple[Any, Any]:
    """The API's own counts, in a registry of its own (served at `/metrics` with the process's CPU and memory)."""
    from prometheus_client import CollectorRegistry, Counter, ProcessCollector

    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    requests = Counter("tribunal_api_requests", "HTTP requests by method, route, status and identity (its name; "
                       "'-' for none)", ["method", "route", "status", "principal"], registry=registry)
    return registry, requests


REGISTRY, REQUESTS = _counters()


@web.middleware
async def counted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer counted by its route's pattern (not the path: a uuid per job would be a series each)."""
    response = await handler(request)
    route = request.match_info.route.resource
    identity: Identity | None = request.get("identity")
    REQUESTS.labels(request.method, route.canonical if route is not None else "unmatched", str(response.status),
                    identity.name if identity is not None else "-").inc()
    return response


@web.middleware
async def problems(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as a problem body."""
    try:
        return await handler(request)
    except ValidationError as e:
        return invalid(e)
    except NotFound as e:
        return problem(404, "Not Found", str(e))
    except web.HTTPException as e:
        response = problem(e.status, e.reason, e.text or e.reason)
        for header in ("Allow", "WWW-Authenticate", "Retry-After"):
            if header in e.headers:
                response.headers[header] = e.headers[header]
        return response
    except TribunalError as e:
        return problem(503, "Service Unavailable", str(e))
    except Exception as e:  # a bug: still a problem body, and the log has the traceback
        log.exception("%s %s failed", request.method, request.path)
        return problem(500, "Internal Server Error", repr(e))


def _attempt(request: web.Request) -> int | None:
    """The `attempt` a finish or failure names in its query, if it names one."""
    text = request.query.get("attempt")
    if text is None:
        return None
    try:
        return int(ATTEMPT_QUERY.validate_python(text))
    except ValidationError:
        raise web.HTTPUnprocessableEntity(text=f"the query parameter attempt is {text!r}: an attempt is an integer "
                                               f"from 1 to {MAX_RETRIES + 1}") from None


KEEPALIVE_S = 15.0  # a comment line this often on a quiet stream: proxies and clients see it is alive
MAX_BODY = 1 << 20  # bytes: a command is one Kafka record, and a producer's request is at most 1 MiB
RATE, BURST = 50.0, 100.0  # requests a second per identity, and at once


PUBLIC = frozenset({"/openapi.json"})  # what anyone may read: the contract, no data


def guarded(keyring: Keyring | None, rates: Rates) -> Any:
    """The middleware that names each request's identity (`request["identity"]`) and holds it to its rate; with
    no keyring (an API on loopback, or `--insecure`) every request passes as no one."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if keyring is None or request.path in PUBLIC:
            return await handler(request)
        try:
            identity = identify(keyring, request.headers.get("Authorization"),
                                request.transport.get_extra_info("peercert") if request.transport else None)
        except Unauthenticated as e:
            raise web.HTTPUnauthorized(text=str(e), headers={"WWW-Authenticate": 'Bearer realm="tribunal"'}) from None
        request["identity"] = identity
        wait = rates.wait(identity.name)
        if wait:
            raise web.HTTPTooManyRequests(text=f"{identity.name} sends faster than {rates.rate:g} requests a second "
                                               f"(bursts of {rates.burst:g}); retry in {wait} s",
                                          headers={"Retry-After": str(wait)})
        return await handler(request)

    return guard


def _allow(request: web.Request, verb: Verb, worker: str | None = None) -> str | None:
    """Refuse (403) what the request's identity may not do; its name, the command's `principal` (None: no auth)."""
    identity: Identity | None = request.get("identity")
    if identity is None:
        return None
    why = may(identity, verb, request.match_info["namespace"], worker)
    if why is not None:
        raise web.HTTPForbidden(text=why)
    return identity.name


async def owned_or_not_found(worker_web: str, identity: Identity | None, namespace: str, uuid: str) -> None:
    """A tenant's request on a job must name a job of its own worker; one that does not is not found (404), as a
    job that is not held is: a tenant learns nothing of other workers' jobs. Anyone else passes."""
    if identity is None or identity.role != "tenant":
        return
    try:
        found = await asyncio.to_thread(worker_page, worker_web, "dispatch", namespace, uuid)
    except NotFound:
        found = {}
    if found.get("worker") != identity.worker:
        raise NotFound(f"no pending or running job {uuid!r} of worker {identity.worker!r} in namespace {namespace!r}")


class Api:
    def __init__(self, client: DispatcherClient, worker_web: str, settings: Settings) -> None:
        self.client, self.worker_web, self.settings = client, worker_web, settings

    async def _body(self, request: web.Request, model: type[BaseModel]) -> Any:
        """The request's JSON body as `model` (`false` is no integer: `schemas.common.NUMBER`); every operation
        with a body requires one, even where each of its fields has a default."""
        raw = await request.read()
        if not raw:
            raise web.HTTPUnprocessableEntity(text=f"a JSON body ({model.__name__}) is required")
        return model.model_validate_json(raw)

    async def _send(self, command: records.Command, jobs: int = 0) -> web.Response:
        """Write `command`; 202 with its coordinates (and, for an assign of `jobs` jobs, their uuids)."""
        from aiokafka.errors import KafkaError

        from streams import kafka

        try:
            written = await self.client.send(command)
        except KafkaError as e:
            raise TribunalError(f"Kafka did not take the record: {kafka.reason(e)}") from None
        body = Written(**written._asdict(), uuids=uuids_of(written, jobs) if jobs else None)
        return web.json_response(body.model_dump(exclude_none=True), status=202)

    async def _job(self, namespace: str, uuid: str) -> dict[str, Any]:
        found: dict[str, Any] = await asyncio.to_thread(worker_page, self.worker_web, "dispatch", namespace, uuid)
        return found

    async def _own_job(self, request: web.Request, verb: Verb) -> str | None:
        """`_allow` for a request on one job, and for a tenant `owned_or_not_found`."""
        principal = _allow(request, verb)
        await owned_or_not_found(self.worker_web, request.get("identity"), request.match_info["namespace"],
                                 request.match_info["uuid"])
        return principal

    async def max_threads(self, request: web.Request) -> web.Response:
        principal = _allow(request, "cap")
        body = await self._body(request, CapBody)
        return await self._send(records.MaxThreadsSet(namespace=request.match_info["namespace"], max=body.max,
                                                      principal=principal))

    async def worker_max(self, request: web.Request) -> web.Response:
        principal = _allow(request, "cap")
        body = await self._body(request, CapBody)
        return await self._send(records.WorkerMaxSet(namespace=request.match_info["namespace"],
                                                     worker=request.match_info["worker"], max=body.max,
                                                     principal=principal))

    async def assign(self, request: web.Request) -> web.Response:
        _allow(request, "assign")  # a reader, or a namespace not its own: refused before the body is read
        body = await self._body(request, AssignBody)
        principal = _allow(request, "assign", body.worker)
        command = records.JobsAssigned(namespace=request.match_info["namespace"], principal=principal,
                                       **body.model_dump())
        return await self._send(command, jobs=len(command.jobs))

    async def finish(self, request: web.Request) -> web.Response:
        principal = await self._own_job(request, "report")
        attempt = _attempt(request)
        return await self._send(records.JobFinished(namespace=request.match_info["namespace"],
                                                    uuid=request.match_info["uuid"], attempt=attempt,
                                                    principal=principal))

    async def fail(self, request: web.Request) -> web.Response:
        principal = await self._own_job(request, "report")
        attempt = _attempt(request)
        body = await self._body(request, FailBody)
        return await self._send(records.JobFailed(namespace=request.match_info["namespace"],
                                                  uuid=request.match_info["uuid"], attempt=attempt,
                                                  error=body.error, principal=principal))

    async def cancel(self, request: web.Request) -> web.Response:
        principal = await self._own_job(request, "report")
        return await self._send(records.JobCancelled(namespace=request.match_info["namespace"],
                                                     uuid=request.match_info["uuid"], principal=principal))

    async def show_namespace(self, request: web.Request) -> web.Response:
        _allow(request, "read")
        found = await asyncio.to_thread(worker_page, self.worker_web, "dispatch", request.match_info["namespace"])
        identity: Identity | None = request.get("identity")
        if identity is not None and identity.role == "tenant":  # the counts, and of the workers only its own
            own = identity.worker
            found = {**found, "workers": {k: v for k, v in found.get("workers", {}).items() if k == own},
                     "jobs": [j for j in found.get("jobs", ()) if j.get("worker") == own]}
            found["jobs_shown"] = len(found["jobs"])
        return web.json_response(found)

    async def show_job(self, request: web.Request) -> web.Response:
        await self._own_job(request, "read")
        return web.json_response(await self._job(request.match_info["namespace"], request.match_info["uuid"]))

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The worker's starts and final failures as server-sent events, from `Last-Event-ID` (or `?after=`)."""
        namespace, worker = request.match_info["namespace"], request.match_info["worker"]
        _allow(request, "stream", worker)
        from aiokafka.errors import KafkaError

        from streams import kafka

        given = request.headers.get("Last-Event-ID") or request.query.get("after")
        try:
            after = events.Cursor.parse(given) if given else None
            stream: Any = events.follow(self.settings, namespace, worker, after)
            first = await stream.__anext__()  # positioned (or refused) before the answer begins
        except events.BadCursor as e:
            raise web.HTTPUnprocessableEntity(text=str(e)) from None
        except KafkaError as e:
            raise TribunalError(f"Kafka did not answer: {kafka.reason(e)}") from None
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        paced = _with_keepalive(stream, KEEPALIVE_S)
        try:
            await response.write(events.sse(first))
            async for event in paced:
                await response.write(b": keep-alive\n\n" if event is None else events.sse(event))
        except ConnectionResetError:
            pass  # the client went away
        except Exception:  # the answer has begun: no problem body now; the client reconnects from its cursor
            log.exception("the event stream of %s/%s ended", namespace, worker)
        finally:  # the pacing first: it may be waiting on the stream's next record, which must end before the stream
            await paced.aclose()
            await stream.aclose()
        return response

    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import generate_latest

        return web.Response(body=generate_latest(REGISTRY), content_type="text/plain")

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi())

    def app(self, keyring: Keyring | None = None, rates: Rates | None = None,
            max_body: int = MAX_BODY) -> web.Application:
        guard = guarded(keyring, rates or Rates(RATE, BURST))
        app = web.Application(middlewares=[counted, problems, guard], client_max_size=max_body)
        ns = "/namespaces/{namespace}"
        app.router.add_get("/openapi.json", self.openapi)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get(ns, self.show_namespace)
        app.router.add_post(f"{ns}/max-threads", self.max_threads)
        app.router.add_post(f"{ns}/workers/{{worker}}/max", self.worker_max)
        app.router.add_get(f"{ns}/workers/{{worker}}/events", self.events)
        app.router.add_post(f"{ns}/assignments", self.assign)
        app.router.add_get(f"{ns}/jobs/{{uuid}}", self.show_job)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/finish", self.finish)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/fail", self.fail)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/cancel", self.cancel)
        return app


async def _with_keepalive(stream: Any, every: float) -> Any:
    """`stream`'s events, and None whenever it was quiet for `every` seconds."""
    pending = asyncio.ensure_future(stream.__anext__())
    try:
        while True:
            done, _ = await asyncio.wait([pending], timeout=every)
            if not done:
                yield None
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            yield event
            pending = asyncio.ensure_future(stream.__anext__())
    finally:  # the stream's next record is no longer wanted: its read ends before the stream is closed
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


async def serve(settings: Settings, host: str, port: int, worker_web: str, keyring: Keyring | None = None,
                tls: Any = None, rates: Rates | None = None, max_body: int = MAX_BODY) -> None:
    """Serve until cancelled."""
    async with DispatcherClient(settings, namespace="") as client:
        runner = web.AppRunner(Api(client, worker_web, settings).app(keyring, rates, max_body))
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        await site.start()
        log.info("dispatcher API on %s://%s:%d (OpenAPI at /openapi.json; %s)", "https" if tls else "http", host,
                 port, f"identities from {keyring.path}" if keyring else "no authentication")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
