"""The dispatcher's invariants (SPEC §5) over random scripts of commands and ticks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.core.dispatch import DispatchState, buckets, dump, load, rules
from streams.core.dispatch.codec import dump_bucket, touched
from streams.core.dispatch.heap import entries
from streams.core.dispatch.rules import STALE_DEADLINES
from streams.core.dispatch.view import standing
from tests.core.dispatch.script import Script, assign, command, tick

WORKERS = ("a", "b", "c")


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Steps: ("cmd", value), ("finish" | "fail" | "cancel", index of a job assigned so far), or ("wait", ms): time
    passes with no Tick (the ticker stopped for an idle namespace), and the next command is dated after it."""
    steps: list[tuple[str, Any]] = []
    now = 0
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["assign", "assign", "tick", "tick", "max", "wmax", "finish", "fail", "cancel",
                                     "wait"]))
        if kind == "assign":
            start = now + draw(st.integers(-50, 300))
            steps.append(("cmd", assign(draw(st.sampled_from(WORKERS)), max(0, start),
                                        max(0, start) + draw(st.integers(0, 500)), draw(st.integers(1, 4)),
                                        max_retries=draw(st.integers(0, 2)), timeout_ms=draw(st.integers(1, 300)))))
        elif kind == "tick":
            now += draw(st.integers(-20, 200))
            steps.append(("cmd", tick(max(0, now))))
        elif kind == "max":
            steps.append(("cmd", command("MaxThreadsSet", max=draw(st.integers(0, 4)))))
        elif kind == "wmax":
            steps.append(("cmd", command("WorkerMaxSet", worker=draw(st.sampled_from(WORKERS)),
                                         max=draw(st.integers(0, 3)))))
        elif kind == "wait":
            waited = draw(st.integers(1, 400))
            now += waited
            steps.append(("wait", waited))
        else:
            steps.append((kind, draw(st.integers(0, 30))))
    return steps


def folded(steps: list[tuple[str, Any]], split: int | None = None, s: Script | None = None,
           ticked: bool = False, signed: bool = False) -> Iterator[tuple[Script, list[dict[str, Any]]]]:
    """Fold the script step by step, yielding the script and each step's outputs; a finish, failure or
    cancel names a job assigned so far (skipped before any). At `split`, the state is stored and
    reloaded, as a restarted worker would. `ticked`: each command is preceded by a Tick at its time (a step
    of its own). `signed`: every command names a sender, `sender-<step>`."""
    s, uuids = s or Script(), []
    for i, (kind, arg) in enumerate(steps):
        if i == split:
            s.state = load(dump(s.state), buckets(s.state))
        if kind == "wait":
            s.clock += arg
            continue
        if kind == "cmd":
            value = arg
        elif uuids:
            verb = {"finish": "JobFinished", "fail": "JobFailed", "cancel": "JobCancelled"}[kind]
            value = command(verb, uuid=uuids[arg % len(uuids)])
        else:
            continue
        if signed and value["type"] != "Tick":
            value = {**value, "principal": f"sender-{i}"}
        if ticked and value["type"] != "Tick":
            yield s, s.feed(tick(s.clock), at=s.clock)
        outputs = s.feed(value)
        uuids += [u for o in outputs if o["type"] == "JobsAccepted" for u in o["uuids"]]
        yield s, outputs


def run(steps: list[tuple[str, Any]], split: int | None = None, ticked: bool = False,
        signed: bool = False) -> tuple[Script, list[list[dict[str, Any]]]]:
    s = Script()
    return s, [outputs for _, outputs in folded(steps, split, s, ticked, signed)]


def _substance(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Starts and outcomes, without what numbers them (`seq`, `cause`): what a Tick before a command adds else."""
    return [{k: v for k, v in o.items() if k not in ("seq", "cause")} for o in outputs
            if o["type"] not in ("DispatcherHealth", "SilentInput")]


@given(scripts())
def test_a_command_stamped_t_decides_as_a_tick_stamped_t_followed_by_it(steps: list[tuple[str, Any]]) -> None:
    """How time is taken (docs/guide/dispatcher.md): what came due by a command's time happens first, so whether
    the ticker ticked just before a command changes no start, timeout or outcome, only the health records."""
    plain, per_plain = run(steps)
    ticked, per_ticked = run(steps, ticked=True)
    assert _substance([o for step in per_plain for o in step]) == _substance([o for step in per_ticked for o in step])
    assert plain.state.jobs == ticked.state.jobs and plain.state.now == ticked.state.now
    assert (plain.state.running, plain.state.pending, _queues(plain.state)) == (
        ticked.state.running, ticked.state.pending, _queues(ticked.state))


def _queues(state: DispatchState) -> dict[str, tuple[Any, ...]]:
    """Each worker's cap, counts and the jobs its ready queue would hand out, as a set: every job of every run an
    entry stands for (`(*run[i], run, i)`: `run[i:]`) that still waits under that key. A queue's shape, its runs and
    the stale entries it drops lazily depend on the order things were pushed in, not on what it holds."""
    out = {}
    for name, worker in state.workers.items():
        held = {job for entry in entries(worker.ready) for job in entry[3][entry[4]:]}
        live = sorted(j for j in held if j[2] in state.jobs and not state.jobs[j[2]].running
                      and (state.jobs[j[2]].acceptable_start, state.jobs[j[2]].order) == tuple(j[:2]))
        if (worker.max, worker.running, worker.pending, live) != (None, 0, 0, []):
            out[name] = (worker.max, worker.running, worker.pending, live)
    return out


@given(scripts())
def test_caps_order_and_outcomes_hold(steps: list[tuple[str, Any]]) -> None:
    """Each command after a Tick at its time, so that a record's starts are made under the caps it leaves (without
    the Tick, what came due starts under the caps before the command: the property above makes them one)."""
    s, per_step = run(steps, ticked=True)
    jobs: dict[str, dict[str, Any]] = {}  # uuid -> what the outputs say of it
    running: dict[str, str] = {}  # uuid -> worker
    max_threads, worker_max = DispatchState().max, {}
    for outputs in per_step:
        for o in outputs:
            kind = o["type"]
            if kind == "JobsAccepted":
                for u in o["uuids"]:
                    jobs[u] = {"final": 0, "attempts": 0, "worker": o["worker"]}
            elif kind == "JobStarted":
                job = jobs[o["uuid"]]
                assert job["final"] == 0 and o["uuid"] not in running
                job["attempts"] += 1
                assert o["attempt"] == job["attempts"]
                running[o["uuid"]] = o["worker"]
            elif kind in ("JobFinished", "JobCancelled", "JobFailedFinally", "JobRetryScheduled", "JobTimedOut"):
                job = jobs[o["uuid"]]
                assert job["final"] == 0, "an outcome after the final one"
                if kind != "JobTimedOut":  # the attempt is over (a timeout is followed by a retry or a failure)
                    running.pop(o["uuid"], None)
                if o["final"]:
                    job["final"] += 1
            elif kind == "DispatcherHealth":
                max_threads = o["max"]
                worker_max = {w: v["max"] for w, v in o["workers"].items()}
        # the caps hold after every record that started a job (lowering a cap stops nothing that runs)
        started_now = [o for o in outputs if o["type"] == "JobStarted"]
        if started_now:
            assert len(running) <= max_threads
            for o in started_now:
                w = o["worker"]
                cap = worker_max.get(w)
                assert cap is None or sum(1 for x in running.values() if x == w) <= cap
    for job in jobs.values():
        assert job["final"] <= 1
    assert s.state.running == len(running)
    for stream in {o.stream for o in s.outputs}:  # each stream numbered 1, 2, ... with no gap and no repeat
        assert s.seqs(stream) == list(range(1, len(s.seqs(stream)) + 1)), (stream, s.seqs(stream))
    for job in s.state.jobs.values():
        uuid = job.uuid
        assert job.attempt <= job.max_retries + 1
        assert job.expected_start <= job.started_at or not job.running
        assert job.running == (uuid in running)


@given(scripts())
def test_a_start_is_dated_no_earlier_than_its_record_and_no_attempt_times_out_early(
        steps: list[tuple[str, Any]]) -> None:
    """Also after time passed with no Tick: the namespace's clock never lags the record that starts a job, and
    an attempt times out only once its whole timeout has passed since its start."""
    started: dict[tuple[str, int], int] = {}  # (uuid, attempt) -> started_at
    timeouts: dict[str, int] = {}
    before = DispatchState()
    for s, outputs in folded(steps):
        for o in outputs:
            if o["type"] == "JobStarted":  # the job was pending before the record, or assigned by it
                assert o["started_at"] >= o["cause"]["timestamp"], o
                job = before.jobs.get(o["uuid"]) or s.state.jobs[o["uuid"]]
                timeout = timeouts.setdefault(o["uuid"], job.timeout_ms)
                assert o["deadline"] == o["started_at"] + timeout
                started[(o["uuid"], o["attempt"])] = o["started_at"]
            elif o["type"] == "JobTimedOut":
                assert o["at"] - started[(o["uuid"], o["attempt"])] >= timeouts[o["uuid"]], o
        before = s.state


@given(scripts(), st.integers(0, 40))
def test_a_reloaded_state_decides_as_the_one_kept_in_memory(steps: list[tuple[str, Any]], split: int) -> None:
    _, kept = run(steps)
    _, reloaded = run(steps, split)
    assert kept == reloaded


@given(scripts(), st.integers(0, 40))
def test_naming_who_sent_each_command_changes_no_decision_and_a_job_keeps_its_assigner(
        steps: list[tuple[str, Any]], split: int) -> None:
    """SPEC §9: `principal` records who, and is never a cause: the same commands, each naming a sender, decide the
    same outputs byte for byte; every job held names the sender of its assign, across a reload too."""
    _, plain = run(steps)
    s, signed = run(steps, split, signed=True)

    def decided(per_step: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:  # a dead letter quotes its
        return [[{k: v for k, v in o.items() if not k.startswith("original")} for o in step]  # record, the sender
                for step in per_step]  # with it, and says its size
    assert decided(signed) == decided(plain)
    senders = [f"sender-{i}" for i, (kind, value) in enumerate(steps)
               if kind == "cmd" and value["type"] == "JobsAssigned"]
    accepted = [o["uuids"] for step in signed for o in step if o["type"] == "JobsAccepted"]
    assert len(accepted) == len(senders)  # every assign accepted, in order
    assigner = {uuid: sender for sender, uuids in zip(senders, accepted, strict=True) for uuid in uuids}
    assert {job.uuid: job.assigned_by for job in s.state.jobs.values()} == {
        uuid: assigner[uuid] for uuid in s.state.jobs}
    unsigned, _ = run(steps, split)
    assert all(job.assigned_by is None for job in unsigned.state.jobs.values())
    assert len(unsigned.state.jobs) == len(s.state.jobs)


@given(scripts(), st.integers(0, 40))
def test_dropping_stale_deadlines_changes_no_output(steps: list[tuple[str, Any]], split: int) -> None:
    """The deadlines queue rebuilt at every chance (no stale entry kept) decides as one never rebuilt,
    in memory and across a reload."""
    _, kept = run(steps)
    rebuilt_at = rules.STALE_DEADLINES
    try:
        rules.STALE_DEADLINES = -10**9  # rebuilt after every start
        _, always = run(steps)
        _, reloaded = run(steps, split)
        rules.STALE_DEADLINES = 10**9  # never rebuilt
        _, never = run(steps)
    finally:
        rules.STALE_DEADLINES = rebuilt_at
    assert kept == always == reloaded == never


@given(scripts())
def test_no_startable_job_waits_while_a_later_one_of_a_worker_with_room_starts(steps: list[tuple[str, Any]]) -> None:
    """Each command preceded by a Tick at its time: a command first starts what came due, under the caps in force
    until then (a job it assigns itself may see one due earlier start first), and the property below holds for
    what the command itself starts; `test_a_command_stamped_t_decides_as_a_tick_stamped_t_followed_by_it` holds
    the two the same."""
    for s, outputs in folded(steps, ticked=True):
        state = s.state
        started = [o for o in outputs if o["type"] == "JobStarted"]
        if not started:
            continue
        # within a record a worker's running count only rises, so a worker with room at the end had room
        # whenever one of this record's jobs started: none of them may come after a job it left waiting
        keys = [(state.jobs[o["uuid"]].acceptable_start, state.jobs[o["uuid"]].order) for o in started
                if o["uuid"] in state.jobs]
        for job in state.jobs.values():  # left waiting after the record
            if job.running or job.expected_start > state.now or not state.worker(job.worker).has_room():
                continue
            assert state.running >= state.max, f"{job.uuid} startable with room left but not started"
            assert all(key < (job.acceptable_start, job.order) for key in keys), f"{job.uuid} overtaken"


@given(scripts())
def test_the_buckets_a_record_touched_are_all_it_changed(steps: list[tuple[str, Any]]) -> None:
    """The worker rewrites only the job buckets a record touched: kept that way, the stored buckets are the state's."""
    stored: dict[str, list[list[Any]]] = {}
    before = DispatchState()
    for s, _ in folded(steps):
        for name in touched(before, s.state):
            stored[name] = dump_bucket(s.state, name)
        before = s.state
        assert {name: jobs for name, jobs in stored.items() if jobs} == buckets(s.state)


@given(scripts())
def test_every_worker_that_can_start_offers_its_top_and_no_slot_idles(steps: list[tuple[str, Any]]) -> None:
    """The merged queue (`tops`) holds each worker's current top while it has room, so after every record
    either the namespace is at its cap or no worker with room has a startable job."""
    for s, _ in folded(steps):
        state = s.state
        offered = set()
        heap = state.tops
        stack = [heap]
        while stack:
            node = stack.pop()
            if node is not None:
                offered.add(node.item)
                stack += [node.left, node.right]
        for name, worker in state.workers.items():
            if worker.ready is not None and worker.has_room():
                assert (*worker.ready.item[:3], name) in offered, f"{name}'s top is not offered"
        if state.running < state.max:
            startable = [j for j in state.jobs.values() if not j.running and j.expected_start <= state.now
                         and state.worker(j.worker).has_room()]
            assert not startable, f"{startable[0].uuid} waits with a slot free"
        queued = list(entries(state.deadlines))  # ended attempts' deadlines are dropped in time
        assert state.deadline_entries == len(queued) <= 2 * state.running + STALE_DEADLINES
        for job in state.jobs.values():  # and `explain --job` names the cap that holds every waiting job
            found = standing(state, job.uuid)
            assert (found is None) == job.running
            assert found is None or found["reason"] != "none", f"{job.uuid} waits and nothing holds it"
