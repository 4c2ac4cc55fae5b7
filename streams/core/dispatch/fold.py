"""The dispatcher (SPEC §5, seed 002) folded from the log: the fold's entry point (`commands` holds what each
command does, `rules` what follows from it, `emission` what is written).

Per namespace: a pending job may start once `now >= expected_start`; among startable jobs the
earlier acceptable start goes first, ties by assignment order; a job starts only while the
namespace runs fewer than its cap and its worker fewer than the worker's (the seed's SQL has `>`
there, a typo not reproduced). A running attempt that reaches its deadline times out; a timed-out
or failed job is retried while attempts <= max_retries, keeping its place by acceptable start, and
fails for good after that.

Time: the namespace's `now` is the latest timestamp of its records, commands and `Tick`s alike
(`source.event_time`: the broker's append time, since those topics are `LogAppendTime`), never a
clock of the worker's, so replay starts every job at the same `now`. A command is dated as a Tick
is: what came due by its time happens first (timeouts, then the starts that the assigns whose start
came and the freed slots allow), then the command, so that a command stamped t has the starts,
timeouts and outcomes of a Tick stamped t followed by it (only the Tick's health record differs):
whether the ticker happened to tick just before never changes who runs. After an idle spell in which
no Tick came, an assign starts its jobs at its own time, not at the last Tick's, and their timeouts
count from there. A Tick at or before `now` changes nothing, so two tickers do no harm. A Tick's `now`
field is what the ticker read; the broker's stamp is what counts.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from schemas import dispatch as records
from streams.core.admission import offsets_after, reject
from streams.core.deadletter import Rejected
from streams.core.dispatch.commands import DISPATCH_COMMANDS, HANDLERS, REPORTS, acceptable_starts, job_uuid
from streams.core.dispatch.emission import DISPATCHER_HEALTH, JOB_OUTCOMES, JOB_STARTS, OUTPUTS, Out, numbered
from streams.core.dispatch.reports import Report, of_model, read
from streams.core.dispatch.rules import advanced, schedule
from streams.core.dispatch.state import DispatchState
from streams.core.intake import error_text, readable
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, event_time, named_key, record_key

TICKS = "ticks"
INPUTS: tuple[str, ...] = (DISPATCH_COMMANDS, TICKS)
_COMMAND: TypeAdapter[Any] = TypeAdapter(records.DispatchCommand)
_TICK: TypeAdapter[records.Tick] = TypeAdapter(records.Tick)

__all__ = ["DISPATCHER_HEALTH", "DISPATCH_COMMANDS", "INPUTS", "JOB_OUTCOMES", "JOB_STARTS", "OUTPUTS", "TICKS",
           "acceptable_starts", "apply", "job_uuid", "key_of"]


def key_of(record: SourceRecord, topic: str = "") -> str:
    """The namespace a record belongs to: the one its value names, else its key."""
    return named_key(record, "namespace") or record_key(record)


def apply(state: DispatchState, record: SourceRecord, topic: str) -> tuple[DispatchState, list[Emit]]:
    """Fold one record of logical input `topic` (one of `INPUTS`) into its namespace's state."""
    offsets = offsets_after(state.offsets, record)  # `admission.admit`, on this state: a copy is native
    if offsets is None:
        return state, []  # a redelivery after a crash
    admitted = state.copy()
    admitted.offsets, admitted.applied = offsets, state.applied + 1
    if admitted.jobs.touched:  # `touched` names the job buckets this record changes (`versioned.Versioned`)
        admitted.jobs = admitted.jobs.untouched()
    try:
        command = _parse(record, topic)
    except Rejected as rejection:
        return reject(admitted, record, rejection, key_of(record, topic), admitted=True)
    out = Out(record, command.namespace, admitted)  # the namespace `key_of` gives, without parsing again
    # A command is dated as a Tick is: what came due by its time happens first, as a Tick stamped then would
    # have made it, also when the command is refused (a finish that arrives after the deadline finds the
    # attempt timed out; a cap lowered finds the jobs due before it started).
    dated = admitted
    if not isinstance(command, records.Tick):
        dated = advanced(admitted, event_time(record), out)
        if dated is not admitted:
            dated = schedule(dated, out)
    try:
        if isinstance(command, Report):
            after = REPORTS[command.type](dated, command, out)
        else:
            after = HANDLERS[type(command)](dated, command, out)
    except Rejected as rejection:  # raised before the handler emits or changes anything
        if out.seqs is not None:
            dated = numbered(dated, out.seqs)
        after, dead = reject(dated, record, rejection, command.namespace, admitted=True)
        return after, [*out.emits, *dead]
    if out.seqs is not None:
        after = numbered(after, out.seqs)
    return after, out.emits


def _parse(record: SourceRecord, topic: str) -> Any:
    """The command (a `Report` for a report on one job), or `Rejected`."""
    value = readable(record)
    report = read(value) if topic == DISPATCH_COMMANDS else None
    if report is not None:
        if bool(record.key) and record_key(record) != report.namespace:
            raise Rejected("namespace_mismatch", f"{report.type} names namespace {report.namespace!r} but its key "
                                                 f"is {record_key(record)!r}")
        return report
    adapter = _COMMAND if topic == DISPATCH_COMMANDS else _TICK if topic == TICKS else None
    if adapter is None:
        raise Rejected("unknown_topic", f"the dispatcher does not read topic {topic!r}")
    try:
        command = adapter.validate_json(value)
    except ValidationError as error:
        what = "tick" if topic == TICKS else "command"
        raise Rejected("bad_command", f"invalid {what}: {error_text(error)}") from None
    if bool(record.key) and record_key(record) != command.namespace:
        raise Rejected("namespace_mismatch",
                       f"{command.type} names namespace {command.namespace!r} but its key is {record_key(record)!r}")
    if isinstance(command, records.JobFinished | records.JobFailed | records.JobCancelled):
        return of_model(command)
    return command
