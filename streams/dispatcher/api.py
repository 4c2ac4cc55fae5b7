"""`tribunal dispatcher-api`: the dispatcher's REST API (aiohttp, as the worker's own web server).

Writes become records on `dispatch-commands` through `DispatcherClient` and answer 202 with the
record's coordinates once the broker has it (the worker decides when it folds it: watch
`job-starts` and `job-outcomes`, or read the job back). Reads come from the worker's tables, through
its state pages (any worker answers: Faust forwards to the one holding the namespace). Errors are
RFC 9457 problem bodies: 422 for a body or parameter that does not validate, 404 for an unknown
namespace, job or path, 503 when Kafka or the worker does not answer. The OpenAPI document is
`schemas.dispatch_api.openapi()`, served at /openapi.json.
"""

from __future__ import annotations

import asyncio
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
from streams.dispatcher.client import DispatcherClient, uuids_of
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
    requests = Counter("tribunal_api_requests", "HTTP requests by method, route and status",
                       ["method", "route", "status"], registry=registry)
    return registry, requests


REGISTRY, REQUESTS = _counters()


@web.middleware
async def counted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer counted by its route's pattern (not the path: a uuid per job would be a series each)."""
    response = await handler(request)
    route = request.match_info.route.resource
    REQUESTS.labels(request.method, route.canonical if route is not None else "unmatched", str(response.status)).inc()
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
        if "Allow" in e.headers:
            response.headers["Allow"] = e.headers["Allow"]
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


class Api:
    def __init__(self, client: DispatcherClient, worker_web: str) -> None:
        self.client, self.worker_web = client, worker_web

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

    async def max_threads(self, request: web.Request) -> web.Response:
        body = await self._body(request, CapBody)
        return await self._send(records.MaxThreadsSet(namespace=request.match_info["namespace"], max=body.max))

    async def worker_max(self, request: web.Request) -> web.Response:
        body = await self._body(request, CapBody)
        return await self._send(records.WorkerMaxSet(namespace=request.match_info["namespace"],
                                                     worker=request.match_info["worker"], max=body.max))

    async def assign(self, request: web.Request) -> web.Response:
        body = await self._body(request, AssignBody)
        command = records.JobsAssigned(namespace=request.match_info["namespace"], **body.model_dump())
        return await self._send(command, jobs=len(command.jobs))

    async def finish(self, request: web.Request) -> web.Response:
        return await self._send(records.JobFinished(namespace=request.match_info["namespace"],
                                                    uuid=request.match_info["uuid"], attempt=_attempt(request)))

    async def fail(self, request: web.Request) -> web.Response:
        body = await self._body(request, FailBody)
        return await self._send(records.JobFailed(namespace=request.match_info["namespace"],
                                                  uuid=request.match_info["uuid"], attempt=_attempt(request),
                                                  error=body.error))

    async def cancel(self, request: web.Request) -> web.Response:
        return await self._send(records.JobCancelled(namespace=request.match_info["namespace"],
                                                     uuid=request.match_info["uuid"]))

    async def show_namespace(self, request: web.Request) -> web.Response:
        found = await asyncio.to_thread(worker_page, self.worker_web, "dispatch", request.match_info["namespace"])
        return web.json_response(found)

    async def show_job(self, request: web.Request) -> web.Response:
        found = await asyncio.to_thread(worker_page, self.worker_web, "dispatch", request.match_info["namespace"],
                                        request.match_info["uuid"])
        return web.json_response(found)

    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import generate_latest

        return web.Response(body=generate_latest(REGISTRY), content_type="text/plain")

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[counted, problems])
        ns = "/namespaces/{namespace}"
        app.router.add_get("/openapi.json", self.openapi)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get(ns, self.show_namespace)
        app.router.add_post(f"{ns}/max-threads", self.max_threads)
        app.router.add_post(f"{ns}/workers/{{worker}}/max", self.worker_max)
        app.router.add_post(f"{ns}/assignments", self.assign)
        app.router.add_get(f"{ns}/jobs/{{uuid}}", self.show_job)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/finish", self.finish)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/fail", self.fail)
        app.router.add_post(f"{ns}/jobs/{{uuid}}/cancel", self.cancel)
        return app


async def serve(settings: Settings, host: str, port: int, worker_web: str) -> None:
    """Serve until cancelled."""
    async with DispatcherClient(settings, namespace="") as client:
        runner = web.AppRunner(Api(client, worker_web).app())
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        log.info("dispatcher API on http://%s:%d (OpenAPI at /openapi.json)", host, port)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
