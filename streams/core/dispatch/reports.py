"""The commands that report on one job (finished, failed, cancelled), read without pydantic when they plainly can be.

Validating a command through the models' union cost about a fifth of a finish's fold, and a finish is the
dispatcher's commonest command. A report whose bytes are ASCII without an escape, that parses as one JSON
object whose every key is once a field of its type, and whose every value is of its field's type and within
its bounds, is read here with one orjson parse; anything else (`None`) goes through the models, which then
read it or say exactly why not, so the dead letters are the models' own. What is read here is what the
models would read: ASCII without escapes makes every string one and the same to both parsers, counting the
quotes rules out a repeated key, and the checks below are the models' constraints on exactly those types.
"""

from __future__ import annotations

from typing import Final, final

import orjson

from schemas import dispatch as records

MAX_NAME: Final = 200  # `records.Name`
MAX_ERROR: Final = 10_000  # `records.JobFailed.error`
MAX_ATTEMPT: Final = records.MAX_RETRIES + 1  # `records.Attempt`
_FIELDS: Final[dict[str, frozenset[str]]] = {
    "JobFinished": frozenset(records.JobFinished.model_fields),
    "JobFailed": frozenset(records.JobFailed.model_fields),
    "JobCancelled": frozenset(records.JobCancelled.model_fields),
}


@final
class Report:
    """A report on one job, as the fold uses it (a `JobFinished`, `JobFailed` or `JobCancelled` model's fields;
    `attempt` None and `error` empty where the type has none). A plain class: compiled, read natively."""

    __slots__ = ("attempt", "error", "namespace", "type", "uuid")

    def __init__(self, type: str, namespace: str, uuid: str, attempt: int | None = None, error: str = "") -> None:
        self.type, self.namespace, self.uuid, self.attempt, self.error = type, namespace, uuid, attempt, error


def of_model(command: records.JobFinished | records.JobFailed | records.JobCancelled) -> Report:
    """The report a model read."""
    if isinstance(command, records.JobFailed):
        return Report(command.type, command.namespace, command.uuid, command.attempt, command.error)
    if isinstance(command, records.JobFinished):
        return Report(command.type, command.namespace, command.uuid, command.attempt)
    return Report(command.type, command.namespace, command.uuid)


def read(value: bytes) -> Report | None:
    """The report `value` plainly is, or None: the models decide (see the module)."""
    if not value.isascii() or b"\\" in value:
        return None
    try:
        data = orjson.loads(value)
    except ValueError:  # orjson.JSONDecodeError
        return None
    if not isinstance(data, dict) or type(data) is not dict:  # narrowed: compiled, its lookups are the dict's own
        return None
    kind, namespace, uuid = data.get("type"), data.get("namespace"), data.get("uuid")
    if type(kind) is not str or type(namespace) is not str or type(uuid) is not str:
        return None
    fields = _FIELDS.get(kind)
    if fields is None or not fields.issuperset(data.keys()):
        return None
    if not 0 < len(namespace) <= MAX_NAME or not 0 < len(uuid) <= MAX_NAME:
        return None
    attempt, error, principal = data.get("attempt"), data.get("error", ""), data.get("principal")
    if attempt is not None and (type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPT):
        return None
    if type(error) is not str or len(error) > MAX_ERROR:
        return None
    if principal is not None and (type(principal) is not str or not 0 < len(principal) <= MAX_NAME):
        return None
    # every key, and the values of type, namespace, uuid, error and principal (which the fold has no use for)
    strings = len(data) + 3 + ("error" in data) + (principal is not None)
    if value.count(b'"') != 2 * strings:  # a repeated key (the models and orjson might keep different ones)
        return None
    return Report(kind, namespace, uuid, attempt, error)
