"""Shard plans: `tribunal shards node` (a node running a command per task run, or a demonstration sleep),
`tribunal shards tasks` (a job set's task count), and `tribunal shards processes` (what runs of a state directory's
nodes and executors live now, orphans among them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from streams.cli.base import Bootstrap, Prefix, SessionTimeout, ZkHosts, serve, settings_from, shards_cli

JobSet = Annotated[str, typer.Option("--job-set", "-j", help="Job set (the record key)")]
ShardRoot = Annotated[str, typer.Option("--shard-root", help="ZooKeeper root of the job sets")]


@shards_cli.command("node")
def shard_node(job_set: JobSet,
               address: Annotated[str, typer.Option(help="This node's address: the scope strategy sorts by it")],
               node_id: Annotated[str | None, typer.Option("--id", help="This node's id (default: its address)")]
               = None,
               run_log: Annotated[Path | None, typer.Option(help="Append a JSON line per task run start/end, "
                                                            "with its epoch")] = None,
               period: Annotated[float, typer.Option(help="Each owned task runs every this many seconds")] = 5.0,
               command: Annotated[str | None, typer.Option(help=(
                   "What a task's run runs, as a process of this node ({job_set} {task} {epoch} {node}; the same in "
                   "TRIBUNAL_JOB_SET, TRIBUNAL_TASK, TRIBUNAL_EPOCH, TRIBUNAL_NODE): it ends when the node ends, "
                   "however. Without it, a demonstration run sleeps --duration"))] = None,
               state_dir: Annotated[Path, typer.Option(help="--command: the runs' logs and holds files")] = Path(
                   ".tribunal-shards"),
               term_grace: Annotated[float, typer.Option(min=0, help=(
                   "--command: seconds from SIGTERM to SIGKILL when the node stops a run"))] = 10.0,
               duration: Annotated[float, typer.Option(help="Seconds a demonstration task run takes")] = 0.5,
               grace: Annotated[float, typer.Option(help="Seconds the leader waits after a loss before lifting "
                                                    "the pause")] = 2.0,
               snapshot_interval: Annotated[float, typer.Option(help="Seconds between the leader's snapshots "
                                                                "of /live")] = 30.0,
               bootstrap: Bootstrap = None, zookeeper: ZkHosts = None, topic_prefix: Prefix = None,
               shard_root: ShardRoot = "/tribunal/.shards", session_timeout: SessionTimeout = 6.0) -> None:
    """Run a node: it owns the tasks its job set's plan gives it and runs each on its slots, as a process of
    `--command`'s (bound to the node), or a demonstration sleep."""
    from streams.shards import Execution, ShardNode
    from streams.shards.commands import CommandRuns

    settings = settings_from(kafka_bootstrap=bootstrap, zookeeper_hosts=zookeeper, topic_prefix=topic_prefix)

    async def work(run: Execution) -> None:
        steps = max(1, round(duration / 0.05))
        for _ in range(steps):  # short steps, each only while the node still holds the task
            if not run.holds():
                raise asyncio.CancelledError
            await asyncio.sleep(duration / steps)

    runs = CommandRuns(command, state_dir, term_grace) if command is not None else work
    node = ShardNode(settings, job_set, node_id or address, address, runs, period=period,
                     session_timeout=session_timeout, grace=grace, snapshot_interval=snapshot_interval,
                     root=shard_root, run_log=run_log)
    serve(node.serve)


@shards_cli.command("tasks")
def shard_tasks(job_set: JobSet, tasks: Annotated[int, typer.Argument(min=0, help="The job set's tasks: 1..TASKS")],
                strategy: Annotated[str | None, typer.Option(help="scope (the seed's) or ring (moves less on a "
                                                             "join)")] = None,
                bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Set a job set's task count (and strategy): a `TaskCountSet` on shard-events."""
    from schemas.shards import TaskCountSet
    from streams.clients import produce
    from streams.core.shards import SHARD_EVENTS

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    record = TaskCountSet.model_validate({"job_set": job_set, "tasks": tasks, "strategy": strategy})
    topic = settings.topic(SHARD_EVENTS)
    meta = produce(settings, topic, job_set.encode(), json.dumps(record.model_dump(exclude_none=True)).encode())
    typer.echo(f"sent to {topic}[{meta[0]}]@{meta[1]}: {job_set} has {tasks} tasks"
               + (f" ({strategy})" if strategy else ""))


@shards_cli.command("processes")
def task_processes(state_dir: Annotated[Path, typer.Option(help=(
                       "The state directory of the nodes (`shards node --state-dir`) or executors whose task "
                       "processes to list"))] = Path(".tribunal-shards"),
                   orphans: Annotated[bool, typer.Option("--orphans", help=(
                       "Only processes whose node (its guardian) is gone; exit 1 if there are any"))] = False) -> None:
    """List the live processes of task runs and jobs started from a state directory, read from /proc, a line a run:
    whose node or executor, which run (node/task/epoch/number; an executor's: job/attempt), whether its guardian
    still runs (if not: orphans, which a node started again with that state directory ends), its pids and the
    first one's command."""
    from streams.processes.guardian import found

    root = state_dir.resolve()
    runs: dict[tuple[str, str, bool], list[Any]] = {}
    for f in sorted(found(str(root)), key=lambda f: f.pid):
        if not (orphans and f.guarded):
            runs.setdefault((f.mark[len(str(root)) + 1:] or ".", f.run, f.guarded), []).append(f)
    for (whose, run, guarded), processes in sorted(runs.items()):
        pids = ",".join(str(p.pid) for p in processes)
        typer.echo(f"{whose:<16} {run:<14} {'guarded' if guarded else 'ORPHAN':<8} {pids:<20} {processes[0].command}")
    if orphans and runs:
        raise typer.Exit(1)
