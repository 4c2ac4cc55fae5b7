"""The dispatcher's REST API (`tribunal dispatch api`): request and response bodies, and its OpenAPI document.

The paths name the namespace (and the worker or job); the bodies carry the rest of each command
of `schemas.dispatch`. A write answers 202 with where its record was written (the outputs' `cause`
names the same coordinates); a bad request answers 404 or 422 with an RFC 9457 problem body.
Served with an auth file, every operation needs a bearer token (or a client certificate naming an
identity): 401 without a valid one, 403 for one whose role may not, 429 past its rate (with
Retry-After), 413 for a body past the limit; a tenant asking after another worker's job gets 404. A
refused request writes nothing. Every command written names its sender (`principal`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import models_json_schema

from schemas.common import Record
from schemas.dispatch import MAX_RETRIES, Assignment, Cap, Name


class CapBody(Record):
    max: Cap


class AssignBody(Assignment):
    """The seed's `JobAssign`: expected at `start`, acceptable starts spread evenly over [start, end]; `end`
    must not be before `start`."""


class FailBody(Record):
    error: str = Field("", max_length=10_000)


class Written(Record):
    """Where the command's record was written (202 Accepted: the worker decides when it folds it)."""

    topic: str
    partition: int
    offset: int
    uuids: list[str] | None = Field(None, description="an assign's jobs' uuids, in order")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None


MODELS: tuple[type[BaseModel], ...] = (AssignBody, CapBody, FailBody, Problem, Written)
NAME = TypeAdapter(Name).json_schema()  # a path names what a command's field names: the same bounds
NS = {"name": "namespace", "in": "path", "required": True, "schema": NAME}
WORKER = {"name": "worker", "in": "path", "required": True, "schema": NAME}
UUID = {"name": "uuid", "in": "path", "required": True, "schema": NAME}
ATTEMPT_QUERY = TypeAdapter(Annotated[int, Field(ge=1, le=MAX_RETRIES + 1)])  # a query's text, read as an integer
ATTEMPT = {"name": "attempt", "in": "query", "required": False, "schema": ATTEMPT_QUERY.json_schema(),
           "description": "The attempt this report ends, as its JobStarted numbered it: a report for an attempt "
                          "that ended already is dead-lettered (late_report), never applied to a later one. "
                          "Without it, whichever attempt is running."}


def _ref(model: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model}"}


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = {"description": description, "content": {"application/problem+json": {"schema": _ref("Problem")}}}
    return {**answer, "headers": headers} if headers else answer


def _guarded(responses: dict[str, Any], body: bool) -> dict[str, Any]:
    """The answers of an operation behind the guard (`streams.dispatcher.guard`), besides its own."""
    more = {"401": _problem("no valid identity: no token, an unknown or revoked one", {
                "WWW-Authenticate": {"schema": {"type": "string"}}}),
            "403": _problem("the identity's role may not do this in this namespace (or for this worker)"),
            "429": _problem("the identity sends faster than its rate", {
                "Retry-After": {"description": "seconds", "schema": {"type": "integer", "minimum": 1}}})}
    if body:
        more["413"] = _problem("the body is larger than the API takes")
    return {**responses, **more}


def _write(summary: str, params: list[dict[str, Any]], body: str | None, description: str = "") -> dict[str, Any]:
    responses = {"202": {"description": "written to dispatch-commands",
                         "content": {"application/json": {"schema": _ref("Written")}}},
                 "422": _problem("the body or a path parameter is invalid"),
                 "503": _problem("Kafka did not take the record")}
    if any(p is UUID for p in params):
        responses["404"] = _problem("a tenant's request on a job that is not its worker's, or not held")
    operation: dict[str, Any] = {
        "summary": summary, "parameters": params, **({"description": description} if description else {}),
        "responses": _guarded(responses, body is not None)}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    return {"post": operation}


def _read(summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {"get": {"summary": summary, "parameters": params,
                    "responses": _guarded({"200": {"description": "as the worker holds it",
                                                   "content": {"application/json": {"schema": {"type": "object"}}}},
                                           "404": _problem("no such namespace or job"),
                                           "503": _problem("no worker answered")}, False)}}


LAST_EVENT_ID = {"name": "Last-Event-ID", "in": "header", "required": False,
                 "schema": {"type": "string", "pattern": r"^\d{1,6}:\d{1,19}:\d{1,6}:\d{1,19}$"},
                 "description": "The id of the last event handled: the stream resumes right after it (else at the "
                                "end of the log)"}


def _events() -> dict[str, Any]:
    return {"get": {
        "summary": "A worker's starts and final failures, as server-sent events (resumable)",
        "description": "text/event-stream: first a `ready` event whose id is where the stream starts, then a "
                       "`JobStarted` event per start of the worker and a `JobFailedFinally` per job that failed for "
                       "good, each with its JSON as data and, as id, the cursor just past it; a comment line on "
                       "a quiet stream every 15 s. Reconnect with `Last-Event-ID` set to the last id handled: "
                       "nothing handled comes again, nothing after it is lost. A tenant follows its own worker only.",
        "parameters": [NS, WORKER, LAST_EVENT_ID],
        "responses": _guarded({"200": {"description": "the stream", "content": {"text/event-stream": {
                                   "schema": {"type": "string"}}}},
                               "422": _problem("Last-Event-ID is no cursor of this namespace"),
                               "503": _problem("Kafka did not answer")}, False)}}


def openapi() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document (served at /openapi.json, checked in as schemas/openapi/dispatcher-api.json)."""
    _, schemas = models_json_schema([(m, "validation") for m in MODELS], ref_template="#/components/schemas/{model}")
    return {
        "openapi": "3.1.0",
        "info": {"title": "tribunal dispatcher API", "version": "1",
                 "description": __doc__.split("\n\n", 1)[1].replace("\n", " ").strip()},
        "paths": {
            "/namespaces/{namespace}": _read("A namespace: caps, counts, workers and up to 1,000 jobs", [NS]),
            "/namespaces/{namespace}/max-threads": _write("Set the namespace's cap (setMaxThreads)", [NS], "CapBody"),
            "/namespaces/{namespace}/workers/{worker}/max": _write("Set a worker's cap", [NS, WORKER], "CapBody"),
            "/namespaces/{namespace}/assignments": _write(
                "Assign jobs (assignJob)", [NS], "AssignBody",
                "`end` must not be before `start` (422 otherwise): a rule between two fields, which the schema "
                "cannot state; a fuzzer is told it by `schemas/openapi/dispatcher_api_hooks.py`, shipped beside "
                "this document (schemathesis: `SCHEMATHESIS_HOOKS=<that path>`)."),
            "/namespaces/{namespace}/jobs/{uuid}": _read("A pending or running job", [NS, UUID]),
            "/namespaces/{namespace}/jobs/{uuid}/finish": _write("Report a running job done (finishJob)",
                                                                 [NS, UUID, ATTEMPT], None),
            "/namespaces/{namespace}/jobs/{uuid}/fail": _write("Report a running job's attempt failed",
                                                               [NS, UUID, ATTEMPT], "FailBody"),
            "/namespaces/{namespace}/jobs/{uuid}/cancel": _write("Cancel a pending or running job", [NS, UUID], None),
            "/namespaces/{namespace}/workers/{worker}/events": _events(),
        },
        "components": {"schemas": schemas["$defs"],
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": (
                           "a token of `tribunal dispatch api token create` (or a client certificate whose "
                           "common name names an identity, where the API asks for one)")}}},
        "security": [{"bearer": []}],
    }
