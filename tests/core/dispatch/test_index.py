"""The start order the queues give (`tops`, the merge of the workers' `ready` queues) is the one a scan of every
job gives: SPEC §5's order, checked against a from-scratch computation after every record of random scripts."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from streams.core.dispatch import DISPATCH_COMMANDS, JOB_STARTS, DispatchState, rules
from streams.core.dispatch.emission import Out
from streams.core.source import SourceRecord
from tests.core.dispatch.script import NS
from tests.core.dispatch.test_properties import folded, scripts

UNCAPPED = 10**9


def queued_order(state: DispatchState) -> list[str]:
    """The jobs the fold would start next, in order, were the namespace's cap lifted (the workers' caps still
    hold): `rules.schedule` itself, on the queues as the record left them, stale entries and all."""
    record = SourceRecord(DISPATCH_COMMANDS, 0, 0, state.now, NS.encode(), b"{}")
    out = Out(record, NS, state)
    rules.schedule(state._replace(max=UNCAPPED), out)
    return [str(emit.record["uuid"]) for emit in out.emits if emit.stream == JOB_STARTS]


def scanned_order(state: DispatchState) -> list[str]:
    """The same from every job: the startable job with the earliest (acceptable start, order) whose worker has
    room starts, one at a time, each start taking a place of its worker's cap."""
    running = {name: worker.running for name, worker in state.workers.items()}
    waiting = sorted((job.acceptable_start, job.order, job.uuid, job.worker) for job in state.jobs.values()
                     if not job.running and job.expected_start <= state.now)
    order = []
    for _, _, uuid, name in waiting:  # a worker's room only shrinks as its jobs start, so one pass suffices
        cap = state.worker(name).max
        if cap is None or running.get(name, 0) < cap:
            running[name] = running.get(name, 0) + 1
            order.append(uuid)
    return order


@given(scripts())
def test_the_queues_start_jobs_in_the_order_a_scan_of_every_job_gives(steps: list[tuple[str, Any]]) -> None:
    for s, _ in folded(steps):
        assert queued_order(s.state) == scanned_order(s.state)


@given(scripts())
def test_the_order_holds_across_a_reload(steps: list[tuple[str, Any]]) -> None:
    """The codec rebuilds the queues from the jobs alone: they give the same order as the ones kept in memory."""
    for s, _ in folded(steps, split=len(steps) // 2):
        assert queued_order(s.state) == scanned_order(s.state)
