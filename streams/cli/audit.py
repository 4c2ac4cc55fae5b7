"""The audit tools: `topics redrive`, `export`, `replay` (from a file or Kafka, `--verify`), `explain`, `report`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from streams.cli.base import (
    Bootstrap,
    FromBound,
    JobSetOption,
    Prefix,
    ToBound,
    XOption,
    audit_cli,
    fold_named,
    load_policy,
    one_key,
    open_file,
    settings_from,
    topics_cli,
)
from streams.errors import TribunalError
from streams.gc_settings import fewer_collections, freeze_start_up
from streams.settings import Settings

if TYPE_CHECKING:
    from streams.core.source import SourceRecord

MAX_JOBS = 1024  # replay processes at most (each line's process is kept in an unsigned short)


@topics_cli.command("redrive")
def dlq_redrive(topic: Annotated[str, typer.Option(help="Dead-letter topic, without the prefix, e.g. "
                                                   "plugin_decider.dlq")],
                reason: Annotated[str | None, typer.Option(help="Only dead letters with this reason_code")] = None,
                start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
                topic_prefix: Prefix = None) -> None:
    """Produce dead letters' original key and bytes again to their topic, each exactly once.

    `--from`/`--to` pick dead letters by their offset on the dead-letter topic or their time. A
    dead letter redriven before (by any earlier run) is skipped, so running this twice decides
    nothing twice.
    """

    from streams.audit.kafka_log import Bound
    from streams.audit.progress import LazyProgress
    from streams.dlq import redrive

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    with LazyProgress("redriving") as bar:
        summary = asyncio.run(redrive(settings, settings.topic(topic), reason, Bound.parse(start), Bound.parse(end),
                                      bar.advance))
    typer.echo(f"{'reason':<20} {'redriven':>8} {'before':>8} {'filtered':>8}")
    for code, redriven, already, filtered in summary.rows():
        typer.echo(f"{code:<20} {redriven:>8} {already:>8} {filtered:>8}")
    if summary.unreadable:
        typer.echo(f"{summary.unreadable} record(s) on the topic are not dead letters; left alone")
    if summary.not_kept:
        typer.echo(f"{summary.not_kept} dead letter(s) too large to carry their record; left alone "
                   "(each names its record's topic, partition and offset)")
    typer.echo(f"redriven {sum(summary.redriven.values())}, redriven before {sum(summary.already.values())}, "
               f"left by the filters {sum(summary.filtered.values())}")


@audit_cli.command("export")
def export(topics: Annotated[str, typer.Option(help="Comma-separated topics, without the prefix")],
           output_file: Annotated[Path, typer.Option("--output", "-o", help="Replay file, JSON lines ('-': stdout)")],
           start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
           topic_prefix: Prefix = None,
           raw: Annotated[bool, typer.Option("--raw", help="Lines of the raw form: a JSON head [topic, partition, "
                                             "offset, timestamp, key], a tab, the value's bytes (replays faster; "
                                             "`cut -f2-` gives the values, as recorded unless the head marks "
                                             "them base64 or null)")] = False) -> None:
    """Write topics' committed records as a replay file, in the order the worker applied them.

    Records no output names yet (the worker has not reached them) follow in log order: merged by
    timestamp, never reordering a partition.
    """
    from streams.audit.kafka_log import Bound, KafkaLog, within
    from streams.audit.progress import LazyProgress
    from streams.lines import export_line, raw_line

    line = raw_line if raw else export_line
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    names = [settings.topic(t.strip()) for t in topics.split(",") if t.strip()]
    keep = within(Bound.parse(start), Bound.parse(end))
    with LazyProgress("reading") as bar:
        log = KafkaLog.read(settings, bar.advance, topics=names)
    sink = sys.stdout.buffer if str(output_file) == "-" else open_file(output_file, "wb")
    written = 0
    try:
        for r in log.ordered():
            if keep(r):
                sink.write(line(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
                written += 1
    finally:
        if sink is not sys.stdout.buffer:
            sink.close()
    typer.echo(f"exported {written} records of {', '.join(names)}", err=True)


@audit_cli.command("replay")
def replay(input_file: Annotated[Path | None, typer.Option("--input", "-i", help="Exported log, either form "
                                                           "('-': stdin)")] = None,
           output_file: Annotated[Path | None, typer.Option("--output", "-o", help="Decisions, JSON lines "
                                                            "('-': stdout)")] = None,
           from_kafka: Annotated[bool, typer.Option("--from-kafka", help="Read the input topics from the broker "
                                                    "(in the order the worker applied them)")] = False,
           verify: Annotated[bool, typer.Option("--verify", help="Compare every derived output with the recorded "
                                                "output topics; exit 1 at the first divergence")] = False,
           start: FromBound = None, end: ToBound = None, bootstrap: Bootstrap = None,
           topic_prefix: Prefix = None,
           jobs: Annotated[int, typer.Option("--jobs", "-j", min=0, max=MAX_JOBS, help="Processes folding the records "
                                             "(keys are independent; 0: one per core)")] = 0) -> None:
    """Run the pure cores over an exported log, or over the topics themselves, and write or verify the outputs."""
    from streams.lines import LineWriter
    from streams.replay import replay_blocks
    from streams.replay.replayer import Replayer

    if (input_file is None) == (not from_kafka):
        raise TribunalError("give exactly one of --input FILE and --from-kafka")
    if verify and not from_kafka:
        raise TribunalError("--verify compares with the recorded topics: use it with --from-kafka")
    if output_file is None and not verify:
        raise TribunalError("give --output FILE (or --verify)")
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    replayer = Replayer(topic_prefix=settings.topic_prefix)
    processes = jobs or min(os.cpu_count() or 1, MAX_JOBS)
    fewer_collections()
    freeze_start_up()
    started = time.perf_counter()
    sink = None
    if output_file is not None:
        sink = sys.stdout.buffer if str(output_file) == "-" else open_file(output_file, "wb")
    try:
        if from_kafka:
            _replay_kafka(settings, replayer, sink, verify, start, end, processes)
        else:
            assert input_file is not None and sink is not None
            source = sys.stdin.buffer if str(input_file) == "-" else open_file(input_file, "rb")
            try:
                with LineWriter(sink) as writer:
                    for block in replay_blocks(source, replayer, processes):
                        writer.write_block(block)
            finally:
                if source is not sys.stdin.buffer:
                    source.close()
    finally:
        if sink is not None and sink is not sys.stdout.buffer:
            sink.close()
    elapsed = time.perf_counter() - started
    counts = replayer.counts
    typer.echo(f"replayed {counts.get('records', 0)} records ({counts.get('skipped', 0)} skipped) in {elapsed:.2f}s: "
               + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("records", "skipped")), err=True)


def _replay_kafka(settings: Settings, replayer: Any, sink: Any, verify: bool, start: str | None,
                  end: str | None, jobs: int) -> None:
    from streams.audit.kafka_log import Bound, Cut, KafkaLog, replay_log, within
    from streams.audit.progress import LazyProgress
    from streams.lines import LineWriter, output_line

    in_range = within(Bound.parse(start), Bound.parse(end))
    writer = LineWriter(sink) if sink is not None else None
    try:
        with LazyProgress("reading the log") as bar:
            log = KafkaLog.read(settings, bar.advance)
            bar.phase("ordering", len(log.inputs))
            cut = log.cut() if verify else Cut(log.ordered(), log.recorded)
            bar.phase("replaying", len(cut.ordered))
            result = replay_log(cut.ordered, replayer, in_range, cut.recorded if verify else None, bar.advance,
                                (lambda out: writer.write(output_line(out))) if writer is not None else None, jobs)
    finally:
        if writer is not None:
            writer.close()
    if result.divergence is not None:
        typer.echo(result.divergence.describe())
        typer.echo(f"{result.agreed} output records agreed before it", err=True)
        raise typer.Exit(1)
    if verify:
        typer.echo(f"verified: {result.agreed} output records of {result.compared_inputs} input records agree "
                   f"with the recorded topics{cut.describe()}")


@audit_cli.command("explain")
def explain_command(pool: Annotated[str | None, typer.Option(help="Pool id (with --seq)")] = None,
                    group: Annotated[str | None, typer.Option(help="Scheduler group (with --seq)")] = None,
                    namespace: Annotated[str | None, typer.Option(help="Dispatcher namespace (with --seq; with "
                                                                  "--job, saves finding it)")] = None,
                    job_set: JobSetOption = None,
                    seq: Annotated[int | None, typer.Option(help="The decision's seq (scaling-decisions for a "
                                                            "pool, group-health for a group, dispatcher-health "
                                                            "for a namespace, shard-plans for a job set)")] = None,
                    epoch: Annotated[int | None, typer.Option(help="With --job-set: the plan of this epoch (why "
                                                              "each node owns what it owns)")] = None,
                    stream: Annotated[str | None, typer.Option(help="Output topic the seq counts on (default "
                                                               "as --seq says)")] = None,
                    cause: Annotated[str | None, typer.Option(
                        help="Or the input itself: TOPIC:PARTITION:OFFSET")] = None,
                    job: Annotated[str | None, typer.Option(help="Or a dispatcher job's uuid: why it started "
                                                            "when it did (each wait, start and outcome)")] = None,
                    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable")] = False,
                    bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Why a decision was made: input, policy and ranges, state before, rounds and scores, state after, reason."""
    from streams.audit.explain import cause_of_seq, explain, parse_cause, render
    from streams.audit.jobs import job_history, render_history
    from streams.audit.kafka_log import KafkaLog
    from streams.audit.progress import LazyProgress

    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    named = one_key(pool=pool, group=group, namespace=namespace, job_set=job_set)
    if job is None and cause is None and ((seq is None and epoch is None) or named is None):
        raise TribunalError("give --job UUID, --cause TOPIC:PARTITION:OFFSET, or --seq N with one of --pool, --group, "
                            "--namespace and --job-set (or --epoch E with --job-set)")
    with LazyProgress("reading the log") as bar:
        log = KafkaLog.read(settings, bar.advance)
    if job is not None:
        history = job_history(log, settings, job, namespace)
        typer.echo(json.dumps(history, indent=2) if as_json else render_history(history))
        return
    if cause is not None:
        target = parse_cause(cause)
        if not target[0].startswith(settings.topic_prefix):  # given without the deployment's prefix
            target = (settings.topic(target[0]), target[1], target[2])
    else:
        from streams.core.folds import BY_NAME

        assert named is not None
        kind, key = named
        counted = BY_NAME[fold_named(kind)].numbered_by
        if counted is None and stream is None:
            raise TribunalError(f"the {fold_named(kind)} fold numbers no decision stream: give --stream")
        if seq is None and kind != "job_set":
            raise TribunalError("--epoch goes with --job-set")
        field, value = ("seq", seq) if seq is not None else ("epoch", epoch)
        assert value is not None
        target = cause_of_seq(log, settings, stream or counted or "", key, value, field)
    found = explain(log, settings, target)
    typer.echo(json.dumps(found, indent=2) if as_json else render(found))


def actuations(settings: Settings, pool: str, in_range: Callable[[SourceRecord], bool]) -> list[dict[str, Any]]:
    """The pool's `actuations` records in the range, as the report draws them."""
    from streams import kafka
    from streams.clients import read_log
    from streams.topics import ACTUATIONS

    found = []
    for record in asyncio.run(read_log(settings.kafka_bootstrap, [settings.topic(ACTUATIONS)])):
        value = kafka.json_object(record)
        if record.key == pool.encode() and value is not None and in_range(record):
            found.append({"timestamp": record.timestamp, "value": value})
    return sorted(found, key=lambda a: a["timestamp"])


@audit_cli.command("report")
def report(output_file: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write")],
           pool: Annotated[str | None, typer.Option(help="Pool id")] = None,
           group: Annotated[str | None, typer.Option(help="Scheduler group")] = None,
           namespace: Annotated[str | None, typer.Option(help="Dispatcher namespace")] = None,
           job_set: JobSetOption = None, start: FromBound = None, end: ToBound = None, x: XOption = "time",
           bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """A self-contained HTML audit page: plots over time and every decision with its explanation."""
    from streams.audit.explain import explanations
    from streams.audit.kafka_log import Bound, KafkaLog, within
    from streams.audit.progress import LazyProgress
    from streams.audit.report import render_page
    from streams.core.folds import BY_NAME

    named = one_key(pool=pool, group=group, namespace=namespace, job_set=job_set)
    if named is None:
        raise TribunalError("name exactly one of --pool, --group, --namespace and --job-set")
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    kind, key = named
    fold = BY_NAME[fold_named(kind)]
    in_range = within(Bound.parse(start), Bound.parse(end))
    with LazyProgress("reading the log") as bar:
        log = KafkaLog.read(settings, bar.advance)
    found = list(explanations(log, settings, in_range, describe=fold.summary, only=(fold.name, key)))
    span = f"from {start or 'the beginning'} to {end or 'the end'}"
    beside = {"actuations": actuations(settings, key, in_range)} if fold.name == "pools" else {}
    try:
        output_file.write_text(render_page(kind, key, found, span, x, beside))
    except OSError as e:
        raise TribunalError(f"cannot write {output_file}: {e.strerror}") from None
    typer.echo(f"wrote {output_file}: {kind} {key}, {len(found)} input records")



@audit_cli.command("what-if")
def what_if(pool: Annotated[str, typer.Option(help="The pool to replay")],
            policy_file: Annotated[Path, typer.Option("--policy", help="The candidate decider policy (YAML or JSON)")],
            version: Annotated[str | None, typer.Option(help="The candidate's version (a bare seed document's; "
                                                        "default: a hash of its content)")] = None,
            input_file: Annotated[Path | None, typer.Option("--input", "-i", help="An exported log (JSON lines, "
                                                            "as `tribunal audit export` writes); default: the topics")
                                  ] = None,
            start: FromBound = None, end: ToBound = None,
            html_file: Annotated[Path | None, typer.Option("--html", help="Also write the comparison as a page "
                                                           "with plots")] = None,
            as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON")] = False,
            shown: Annotated[int, typer.Option("--show", min=0, help="Differences printed")] = 10,
            x: XOption = "time", bootstrap: Bootstrap = None, topic_prefix: Prefix = None) -> None:
    """Replay a pool's recorded inputs under a candidate policy and compare with what was decided. Writes nothing
    to the broker."""
    from schemas.policy import DeciderPolicy
    from streams.audit.kafka_log import Bound, KafkaLog, within
    from streams.audit.progress import LazyProgress
    from streams.audit.whatif import compare, render_html, render_text
    from streams.lines import records_of

    candidate = load_policy(policy_file, version)
    if not isinstance(candidate, DeciderPolicy):
        raise TribunalError(f"{policy_file}: what-if replays decider policies; this one is {candidate.kind}")
    settings = settings_from(kafka_bootstrap=bootstrap, topic_prefix=topic_prefix)
    first, last = Bound.parse(start), Bound.parse(end)
    if input_file is None:
        with LazyProgress("reading the log") as bar:
            records = KafkaLog.read(settings, bar.advance).ordered()
    else:
        with open_file(input_file, "rb") as source:
            records = list(records_of(source))
    comparison = compare(records, pool, candidate, settings.topic_prefix, within(first, last),
                         last.time_ms if last is not None else None)
    if not comparison.inputs:
        raise TribunalError(f"no input of pool {pool!r} in the range")
    if html_file is not None:
        try:
            html_file.write_text(render_html(comparison, x))
        except OSError as e:
            raise TribunalError(f"cannot write {html_file}: {e.strerror}") from None
    typer.echo(json.dumps(comparison.summary(), indent=2) if as_json else render_text(comparison, shown))
