"""`tribunal audit replay` over an exported log: the seed's worked example, dead letters, exact bytes."""

from __future__ import annotations

import base64
import io
import json
import os
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.clients import envelope
from streams.core.source import SourceRecord
from streams.lines import Output, ReplayInputError, export_row, line_head, line_tail, output_line, raw_line, read_line
from streams.replay import replay_blocks, replay_lines
from streams.replay.parallel import SKIP, _FileChunks, _LineRouting, derive_all, encode_all
from streams.replay.replayer import Replayer
from tests.core.pools.builders import seed_policy
from tests.helpers import tribunal


def line(topic: str, offset: int, value: Any, key: str | None = "pool-a", **extra: Any) -> str:
    row = {"topic": topic, "partition": 0, "offset": offset, "timestamp": 1_732_200_000_000 + offset,
           "key": key, "value": value, **extra}
    return json.dumps(row)


def metric(app: str, metrical: float) -> dict[str, str]:
    return {"Command": "app-metrical", "Channel": "plugin_decider",
            "Body": json.dumps({"App": app, "Metrical": metrical})}


def worked_example_log(path: Path) -> None:
    lines = [line("policies", 0, seed_policy())]
    for offset, (app, value) in enumerate([("ats", 55), ("hadoop", 70), ("ats", 75), ("ats", 30), ("Hadoop", 90)]):
        lines.append(line("plugin_decider", offset, metric(app, value)))
    lines.append(line("plugin_decider", 5, None, value_b64=base64.b64encode(b"not json").decode()))
    lines.append(line("scaling-decisions", 0, {"an": "output line, not an input"}))
    lines.append(line("plugin_decider", 6, metric("ats", 55), key=None))  # pool default: no policy
    path.write_text("\n".join(lines) + "\n")


def test_the_seeds_worked_example_through_tribunal_replay(tmp_path: Path) -> None:
    log, out = tmp_path / "log.jsonl", tmp_path / "out.jsonl"
    worked_example_log(log)
    result = tribunal("audit", "replay", "--input", str(log), "--output", str(out))
    assert "replayed 8 records (1 skipped)" in result.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    decisions = [r["value"] for r in rows if r["topic"] == "scaling-decisions"]
    assert [(d["outcome"], d["instances"]["ats"], d["instances"]["hadoop"]) for d in decisions] == [
        ("policy", 5, 5), ("steady", 5, 5), ("rejected", 5, 5), ("partial", 8, 2), ("idle", 8, 2), ("partial", 3, 7)]
    assert [d["seq"] for d in decisions] == [1, 2, 3, 4, 5, 6]
    assert [d["cause"]["offset"] for d in decisions[1:]] == [0, 1, 2, 3, 4]
    assert all(r["key"] == "pool-a" for r in rows if r["topic"] == "scaling-decisions")
    latest = {r["key"]: r["value"] for r in rows if r["topic"] == "pool-instances"}  # as compaction keeps them
    assert {k: (v["instances"], v["seq"]) for k, v in latest.items()} == {"pool-a/ats": (3, 6), "pool-a/hadoop": (7, 6)}
    assert len([r for r in rows if r["topic"] == "pool-instances"]) == 6  # adopted (2), partial (2), partial (2)

    dead = [r for r in rows if r["topic"] == "plugin_decider.dlq"]
    assert [d["value"]["reason_code"] for d in dead] == ["bad_envelope", "no_policy"]
    assert base64.b64decode(dead[0]["value"]["original_value_b64"]) == b"not json"
    assert dead[1]["key"] == "default"


def test_replay_is_byte_for_byte_reproducible(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    worked_example_log(log)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    tribunal("audit", "replay", "-i", str(log), "-o", str(first))
    tribunal("audit", "replay", "-i", str(log), "-o", str(second))
    assert first.read_bytes() == second.read_bytes() and first.stat().st_size > 0


def test_a_corrupt_line_is_reported_with_its_number(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(line("policies", 0, seed_policy()) + "\n{not a record\n")
    result = tribunal("audit", "replay", "-i", str(log), "-o", str(tmp_path / "out.jsonl"), check=False)
    assert result.returncode == 1 and "line 2 is not a record line" in result.stderr


def test_a_bad_line_after_many_records_ends_a_replay_on_several_processes_as_on_one(tmp_path: Path) -> None:
    """Chunks in flight when the bad line is read are merged first; nothing left queued keeps the process
    from exiting (it waited for ever to send them)."""
    log = tmp_path / "log.jsonl"
    rows = [line("policies", 0, seed_policy())]
    rows += [line("plugin_decider", i, metric("ats" if i % 3 else "hadoop", i % 101)) for i in range(18_000)]
    log.write_text("\n".join([*rows, "{not a record", *rows[1:200]]) + "\n")
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out-{jobs}.jsonl"
        result = tribunal("audit", "replay", "-i", str(log), "-o", str(out), "--jobs", jobs, check=False, timeout=120)
        assert result.returncode == 1 and "line 18002 is not a record line" in result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].count(b"\n") > 18_000


def lines_of(records: list[SourceRecord]) -> list[bytes]:
    """Export lines of `records`, in the layouts a replay file may have: `tribunal audit export`'s, `json.dumps`'
    (spaces, non-ASCII escaped), fields in another order, the key written twice (the last one counts), the raw
    form (`export --raw`)."""
    lines = []
    for i, record in enumerate(records):
        row = export_row(*record)
        layout = i % 6
        if layout == 0:
            lines.append(orjson.dumps(row))
        elif layout == 1:
            lines.append(json.dumps(row).encode())
        elif layout == 2:
            lines.append(json.dumps(dict(reversed(row.items())), ensure_ascii=False).encode())
        elif layout == 3 and row["key"] is not None:
            lines.append(orjson.dumps({**row, "key": "pool-elsewhere"})[:-1] + b',"key":' + orjson.dumps(row["key"])
                         + b"}")
        elif layout == 4:
            lines.append(raw_line(*record))
        else:
            lines.append(orjson.dumps(row))
    return lines


def mixed_log(records: int, seed: int = 3) -> list[SourceRecord]:
    """Pools and scheduler groups, keyed and keyless, broken records and a topic no fold reads."""
    rng = random.Random(seed)
    log = [SourceRecord("policies", p % 2, p, p, f"pool-{p}".encode(), json.dumps(seed_policy()).encode())
           for p in range(5)]
    for i in range(records):
        kind = rng.random()
        if kind < 0.6:
            value = envelope(rng.choice(["ats", "hadoop"]), rng.randrange(101), "plugin_decider")
            log.append(SourceRecord("plugin_decider", i % 2, i, i, f"pool-{rng.randrange(6)}".encode(), value))
        elif kind < 0.9:
            group = f"g{rng.randrange(3)}"
            event = rng.choice([{"type": "SchedulerRegistered", "group": group, "scheduler": f"s{rng.randrange(4)}",
                                 "fault_tolerance": 1},
                                {"type": "JobCreated", "group": group, "job": f"j{rng.randrange(50)}"}])
            topic = "scheduler-events" if event["type"] == "SchedulerRegistered" else "job-events"
            log.append(SourceRecord(topic, i % 2, i, i, None, json.dumps(event).encode()))
        elif kind < 0.95:
            log.append(SourceRecord("plugin_decider", 0, i, i, b"pool-1", b"{broken"))
        else:
            log.append(SourceRecord("scaling-decisions", 0, i, i, b"pool-1", b"{}"))
    return log


@pytest.mark.parametrize("jobs", [2, 3])
def test_replay_on_several_processes_derives_the_same_bytes_in_the_same_order(jobs: int) -> None:
    log = mixed_log(600)
    alone, together = Replayer(), Replayer()
    expected = [(record, [output_line(row) for row in rows]) for record, rows in derive_all(log, alone)]
    got = [(record, [output_line(row) for row in rows])
           for record, rows in derive_all(log, together, jobs, chunk_size=37)]  # many chunks in flight
    assert got == expected
    assert sum(len(rows) for _, rows in got) > len(log) // 2
    assert together.counts == alone.counts and alone.counts["skipped"] > 0


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.parametrize("source", ["lines", "file"])
def test_the_encoded_blocks_are_the_derived_output_lines_whatever_the_processes(jobs: int, source: str,
                                                                               tmp_path: Path) -> None:
    """Lines handed to the processes, or a file each reads itself from where it stands (its first line read
    here before, and given to neither: its outputs are not expected)."""
    log = mixed_log(600)
    alone, encoded = Replayer(), Replayer()
    expected = b"".join(output_line(row) + b"\n" for _, rows in derive_all(log[1:], alone) for row in rows)
    path = tmp_path / "log.lines"
    path.write_bytes(b"\n".join(lines_of(log)))  # the last line with no newline
    with path.open("rb") as file:
        file.readline()
        given = file if source == "file" else list(file)
        blocks = list(encode_all(given, encoded, jobs, chunk_size=37))  # many chunks in flight
    assert b"".join(blocks) == expected and len(blocks) > 10
    assert encoded.counts == alone.counts


def test_only_a_regular_file_read_by_its_name_is_read_by_the_processes_themselves(tmp_path: Path) -> None:
    path = tmp_path / "log.lines"
    path.write_bytes(b"".join(raw_line(*record) for record in mixed_log(10)))
    with path.open("rb") as file:
        assert _FileChunks.of(file, 7) is not None
    with path.open("r") as text, open("/dev/null", "rb") as device:
        assert _FileChunks.of(text, 7) is None and _FileChunks.of(device, 7) is None
    assert _FileChunks.of(io.BytesIO(path.read_bytes()), 7) is None
    read, write = os.pipe()
    with os.fdopen(read, "rb") as pipe:
        os.close(write)
        assert _FileChunks.of(pipe, 7) is None


@given(topic=st.text(), partition=st.integers(0, 2**31), offset=st.integers(0, 2**63), timestamp=st.integers(-1, 2**63),
       key=st.text(), value=st.binary())
def test_an_output_line_is_its_head_its_offset_and_its_tail(topic: str, partition: int, offset: int, timestamp: int,
                                                               key: str, value: bytes) -> None:
    line = line_head(topic, partition) + b"%d" % offset + line_tail(timestamp, key, value)
    assert line == output_line(Output(topic, partition, offset, timestamp, key, value)) + b"\n"


@pytest.mark.parametrize(("jobs", "chunk"), [(1, 5_000), (1, 7), (2, 5_000), (2, 7), (3, 4)])
def test_a_bad_line_comes_after_the_lines_of_every_record_before_it(jobs: int, chunk: int) -> None:
    lines = [line("policies", 0, seed_policy())] + [line("plugin_decider", i, metric("ats", 5 * i)) for i in range(19)]
    lines += ["{not a record", line("plugin_decider", 20, metric("ats", 75))]
    expected: list[bytes] = []
    with pytest.raises(ReplayInputError, match="line 21 is not a record line"):
        for out in replay_lines(lines):
            expected.append(out + b"\n")
    got: list[bytes] = []
    with pytest.raises(ReplayInputError, match="line 21 is not a record line"):
        for block in encode_all(lines, Replayer(), jobs, chunk_size=chunk):
            got.append(block)
    assert b"".join(got) == b"".join(expected) and len(expected) > 20


@pytest.mark.parametrize(("jobs", "chunk"), [(2, 5_000), (2, 7), (3, 4), (3, 13)])
@pytest.mark.parametrize("bad", ['null', '[1]', '{"topic": "plugin_decider", "partition": 0, "offset": "x", '
                                 '"timestamp": 0, "key": "pool-a", "value": null}'])
def test_a_bad_line_only_its_own_process_reads_stops_the_replay_where_one_process_does(jobs: int, chunk: int,
                                                                                      bad: str) -> None:
    """A line that parses but describes no record: JSON `null`, a list, or a record line of a keyed topic whose
    offset is no number (routed by its key, so only the process that owns pool-a reads it)."""
    lines = [line("policies", 0, seed_policy())] + [line("plugin_decider", i, metric("ats", 5 * i)) for i in range(19)]
    lines += [line("plugin_decider", i, metric("ats", 5 * i), key="pool-b") for i in range(20, 30)]
    lines += [bad, line("plugin_decider", 40, metric("ats", 75))]
    expected: list[bytes] = []
    with pytest.raises(ReplayInputError, match="line 31 is not a record line"):
        for block in encode_all(lines, Replayer(), 1):
            expected.append(block)
    got: list[bytes] = []
    with pytest.raises(ReplayInputError, match="line 31 is not a record line"):
        for block in encode_all(lines, Replayer(), jobs, chunk_size=chunk):
            got.append(block)
    assert b"".join(got) == b"".join(expected) and b"".join(expected).count(b"\n") > 25


@pytest.mark.parametrize("jobs", [1, 2])
def test_blank_lines_are_skipped_and_a_last_line_needs_no_newline(jobs: int) -> None:
    lines = ["", line("policies", 0, seed_policy()), "  ", line("plugin_decider", 0, metric("ats", 55)), "\r",
             line("plugin_decider", 1, metric("hadoop", 95))]
    expected = b"".join(out + b"\n" for out in replay_lines(lines[1::2]))
    got = b"".join(replay_blocks(io.BytesIO("\n".join(lines).encode()), jobs=jobs))
    assert got == expected and expected.count(b"\n") > 3


@given(topic=st.text(), partition=st.integers(0, 2**31), offset=st.integers(0, 2**63), timestamp=st.integers(-1, 2**63),
       key=st.one_of(st.none(), st.binary(), st.text().map(str.encode)),
       value=st.one_of(st.none(), st.binary(), st.text().map(str.encode), st.just(b'{"a":"b\\tc"}')))
def test_a_raw_line_reads_back_as_its_record_exactly_as_bytes_or_as_text(topic: str, partition: int, offset: int,
                                                                         timestamp: int, key: bytes | None,
                                                                         value: bytes | None) -> None:
    record = SourceRecord(topic, partition, offset, timestamp, key, value)
    line = raw_line(*record)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert read_line(line, 1) == record
    text = line.decode("utf-8")
    assert text.splitlines() == [text[:-1]]  # one line, however it is split
    assert read_line(text[:-1], 1) == record


@pytest.mark.parametrize(("topic", "key", "value"), [("t\u2028x", "k\x85".encode(), b"{}"),
                                                      ("t", "\u2029".encode(), "a\u2028b".encode()),
                                                      ("t", b"k", b"")])
def test_a_raw_line_is_one_line_whatever_its_text_holds_and_crlf_ends_it_as_lf_does(topic: str, key: bytes,
                                                                                    value: bytes) -> None:
    record = SourceRecord(topic, 1, 2, 3, key, value)
    line = raw_line(*record)
    assert line.decode().splitlines() == [line.decode()[:-1]] and line.count(b"\n") == 1
    assert read_line(line, 1) == record == read_line(line[:-1] + b"\r\n", 1) == read_line(line.decode(), 1)


@pytest.mark.parametrize("bad", ['[1]', '["t",0,0,0,"k"]', '["t",0,0,0]\t{}', '["t",0,"0",0,"k"]\t{}',
                                 '["t",0,0,0,7]\t{}', '["t",0,0,0,"k",{"value":null}]\tx',
                                 '["t",0,0,0,"k",{"value_b64":true}]\t*', '["t",0,0,0,"k",[]]\t{}', '[\t{}',
                                 '["t",0,0,0,"k",{"key_b64":"!!!!"}]\tv', '["t",0,0,0,[1],{"key_b64":"aw=="}]\tv',
                                 '["t",0,0,0,"k",{"valu_b64":true}]\tdg=='])
def test_a_raw_line_that_describes_no_record_is_refused_with_its_number(bad: str) -> None:
    with pytest.raises(ReplayInputError, match="line 4 is not a record line"):
        read_line(bad, 4)


def test_a_key_that_is_not_utf8_is_exported_and_read_back_exactly() -> None:
    from streams.lines import export_row, record_of

    for key in (b"\xc3\x28pool", b"pool-a", None):
        row = json.loads(json.dumps(export_row("policies", 0, 1, 2, key, b"{}")))
        assert record_of(row).key == key
        assert ("key_b64" in row) == (key == b"\xc3\x28pool")


def test_a_log_decided_before_decisions_could_carry_only_changes_replays_to_the_same_bytes(tmp_path: Path) -> None:
    """Issue 49: a pool keeps the form it was decided in. The inputs (`data/make_before_49.py`: three pools, every
    kind of decision) replayed on this tree give, byte for byte, what the tree before the change wrote."""
    data = Path(__file__).parent / "data"
    out = tmp_path / "out.jsonl"
    tribunal("audit", "replay", "-i", str(data / "decisions-before-49.inputs.jsonl"), "-o", str(out))
    expected = (data / "decisions-before-49.outputs.jsonl").read_bytes()
    assert expected.count(b"scaling-decisions") > 200 and b'"round":"preempt"' in expected
    assert out.read_bytes() == expected


def test_a_dispatcher_log_written_before_commands_named_their_sender_replays_to_the_same_bytes(tmp_path: Path) -> None:
    """Issue 56: commands gained an optional `principal`. A log of two namespaces written before (`data/
    make_before_56.py`: every kind of command, none naming a sender) replayed on this tree gives, byte for byte,
    what the tree before the change wrote."""
    data = Path(__file__).parent / "data"
    out = tmp_path / "out.jsonl"
    tribunal("audit", "replay", "-i", str(data / "dispatch-before-56.inputs.jsonl"), "-o", str(out))
    expected = (data / "dispatch-before-56.outputs.jsonl").read_bytes()
    assert expected.count(b'"JobStarted"') > 50 and b'"JobRetryScheduled"' in expected and b"late_report" in expected
    assert out.read_bytes() == expected


keys = st.one_of(st.none(), st.sampled_from(["pool-a", "pool-b", "Pool é", "g1", ""]), st.text(max_size=6),
                 st.binary(max_size=6), st.just("k" * 1100))
values = st.one_of(st.none(), st.just(metric("ats", 55)), st.fixed_dictionaries({"group": st.text(max_size=4)}),
                   st.fixed_dictionaries({"pool": st.sampled_from(["pool-a", "pool-b"]), "type": st.just("Tick")}),
                   st.binary(max_size=8))


@given(st.sampled_from(["policies", "plugin_decider", "plugin_justice", "cluster-events", "job-events",
                        "scaling-decisions", "x.plugin_decider"]), keys, values,
       st.sampled_from(["export", "dumps", "reversed", "twice", "escaped", "escaped_twice", "topic_twice",
                        "spaced_key", "raw"]), st.sampled_from(["", "x."]))
def test_a_line_routed_by_its_key_goes_where_its_record_does(topic: str, key: str | bytes | None, value: Any,
                                                               layout: str, prefix: str) -> None:
    """A replay on several processes routes a line by the key it names, without building its record, wherever
    that key alone decides; whatever the line's layout, that is the process the record, built, would go to."""
    raw_key = key.encode() if isinstance(key, str) else key
    raw_value = value if isinstance(value, bytes) else (None if value is None else orjson.dumps(value))
    row = export_row(topic, 1, 2, 3, raw_key, raw_value)
    if layout == "export":
        line = orjson.dumps(row)
    elif layout == "dumps":
        line = json.dumps(row).encode()
    elif layout == "reversed":
        line = json.dumps(dict(reversed(row.items()))).encode()
    elif layout == "twice":  # the key written again after the value: JSON's last one counts
        line = orjson.dumps(row)[:-1] + b',"key":"pool-z"}'
    elif layout == "escaped":  # the key's name itself escaped
        line = orjson.dumps(row).replace(b'"key"', b'"k\\u0065y"')
    elif layout == "escaped_twice":  # the key written again, its name escaped, after a head as the export writes it
        line = orjson.dumps(row)[:-1] + b',"k\\u0065y":"pool-z"}'
    elif layout == "topic_twice":
        line = orjson.dumps(row)[:-1] + b',"topic":"plugin_decider"}'
    elif layout == "raw":
        line = raw_line(topic, 1, 2, 3, raw_key, raw_value)
    else:
        line = orjson.dumps(row).replace(b'"key":', b'"key" :  ')
    routing = _LineRouting(prefix, 251)
    record = read_line(line, 1)
    assert record is not None
    assert routing.line(line, 1)[0] == routing(record)
    primed = _LineRouting(prefix, 251)  # a line of the same topic and key first, as the export writes it: the
    primed.line(orjson.dumps(row), 1)  # routing then answers the next from what it remembered of them
    assert primed.line(line, 2)[0] == routing(record)
    assert routing.line(b"  ", 1) == (SKIP, None, None)
    with pytest.raises(ReplayInputError):  # `null` is no blank line
        routing.line(b"null", 1)
