"""`tribunal audit replay` over a generated log of a million records: records per second, one process.

The log holds a decider policy for each of 20 pools (10 apps each), then metric envelopes for random
apps and pools, with 1% malformed records (they go to the DLQ lines). It is written once, in the raw
form (`tribunal audit export --raw`: values as they are, read without re-encoding them; `--form
json`: the JSON lines), then replayed by the CLI exactly as a user runs it, and timed end to end.
Beside it, in the same run, the limit one process could reach: the folds and the encoding of their
outputs alone, over records parsed before the clock starts (`folds_alone`). And what no way of
splitting the work can avoid, measured over the same records: reading the lines into records
(`reading`), writing the output lines (`writing`), and the folds alone run by two processes at once
(`side_by_side`: how two such processes share this machine). From them, the most a replay on N
processes could reach against N times the folds alone: each process reading, folding and writing
only its own records, nothing handed over and nothing merged.
Run: `.venv/bin/python bench/replay_file.py [--records 1000000] [--form raw|json]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

import orjson
from core_fold import policy  # type: ignore[import-not-found]
from machine import describe, ratio  # type: ignore[import-not-found]

from streams.gc_settings import fewer_collections
from streams.lines import export_line, raw_line, records_of
from streams.replay.parallel import encode_all
from streams.replay.replayer import Replayer

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))
ALONE = 300_000  # records the folds alone are measured over (all of them held in memory)


def generate(path: Path, records: int, form: str, pools: int = 20, apps: int = 10, seed: int = 11) -> None:
    """The log, written as `tribunal audit export` writes it in `form` (its `--raw` or not)."""
    rng = random.Random(seed)
    line = raw_line if form == "raw" else export_line
    with path.open("wb") as out:
        for p in range(pools):
            out.write(line("policies", p % 4, p, 0, f"pool-{p:02d}".encode(), json.dumps(policy(apps)).encode()))
        offsets = [0] * 4
        for i in range(records - pools):
            p = rng.randrange(pools)
            part = p % 4
            if rng.random() < 0.01:
                value = b"{broken"
            else:
                body = json.dumps({"App": f"app{rng.randrange(apps):04d}", "Metrical": rng.randrange(101)})
                value = orjson.dumps({"Command": "app-metrical", "Channel": "plugin_decider", "Body": body})
            out.write(line("plugin_decider", part, offsets[part], 1_732_200_000_000 + i, f"pool-{p:02d}".encode(),
                           value))
            offsets[part] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=0, help="replay's processes (0: one per core)")
    parser.add_argument("--form", choices=["raw", "json"], default="raw",
                        help="the replay file's form: `tribunal audit export --raw`'s, or its JSON lines")
    parser.add_argument("--log", type=Path, help="where the log is written once (default: bench/results/)")
    args = parser.parse_args()
    args.log = args.log or Path(__file__).resolve().parent / "results" / f"replay-log.{args.form}.lines"
    args.log.parent.mkdir(parents=True, exist_ok=True)
    if not args.log.exists() or sum(1 for _ in args.log.open("rb")) != args.records:
        generate(args.log, args.records, args.form)
    out = args.log.with_suffix(".out.jsonl")
    started = time.perf_counter()
    proc = subprocess.run([TRIBUNAL, "audit", "replay", "--input", str(args.log), "--output", str(out),
                           "--jobs", str(args.jobs)],
                          capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - started
    print(describe())
    print(proc.stderr.strip())
    sizes = f"input {args.log.stat().st_size / 1e6:.0f} MB, output {out.stat().st_size / 1e6:.0f} MB"
    rate = args.records / elapsed
    print(f"tribunal audit replay: {args.records:,} records of the {args.form} form in {elapsed:.1f}s wall = "
          f"{rate:,.0f} records/s ({sizes}, --jobs {args.jobs})")
    alone, measured = folds_alone(args.log, ALONE)
    jobs = args.jobs or os.cpu_count() or 1
    print(f"the folds and their encoding alone, one process, over the first {measured:,} records read beforehand: "
          f"{alone:,.0f} records/s; replay {rate / alone:.2f} of it ({rate / alone / jobs:.2f} of {jobs} times it)")
    with args.log.open("rb") as lines:
        raw = list(islice(lines, ALONE))
    read_rate, write_rate = reading(raw), writing(raw, out.with_suffix(".floor"))
    together = side_by_side(args.log, ALONE)
    alone_us, read_us, write_us = 1e6 / alone, 1e6 / read_rate, 1e6 / write_rate
    best = alone_us / (alone_us + read_us + write_us)
    print(f"reading the lines into records alone: {read_rate:,.0f} records/s ({read_us:.1f} us a record); writing "
          f"their output lines alone: {write_rate:,.0f} records/s ({write_us:.1f} us); the folds {alone_us:.1f} us")
    print(f"the folds alone on two processes at once: {together / 2:,.0f} records/s each, "
          f"{together / alone / 2:.2f} of one alone")
    print(f"the most a replay could reach against {jobs} times the folds alone (each process reading, folding and "
          f"writing its own records, nothing else): {best:.2f} x {together / alone / 2:.2f} (two at once) = "
          f"{best * together / alone / 2:.2f}; this replay {rate / alone / jobs:.2f}")
    ratio("replay on one process per core / the replay bench's own ceiling",
          [(rate / alone / jobs) / (best * together / alone / 2)])


def folds_alone(log: Path, most: int) -> tuple[float, int]:
    """Records per second of what a replay process cannot do without: each record folded and its outputs encoded
    as lines (`Replayer.encode`), over records parsed before the clock starts, nothing written. The limit one
    process could reach, beside which the replay's reading, merging and writing show."""
    with log.open("rb") as lines:
        records = list(records_of(islice(lines, most)))
    replayer = Replayer()
    fewer_collections()  # as `tribunal audit replay` runs
    started = time.perf_counter()
    for at in range(0, len(records), 5_000):  # lines dropped per chunk, as the replay hands them on
        heads: list[bytes] = []
        tails: list[bytes] = []
        for record in records[at:at + 5_000]:
            replayer.encode(record, heads, tails)
    return len(records) / (time.perf_counter() - started), len(records)


def reading(raw: list[bytes]) -> float:
    """Records per second of reading `raw` lines into records (`records_of`): what replay must do for each record,
    in some process, before it folds it."""
    started = time.perf_counter()
    records = list(records_of(raw))
    return len(records) / (time.perf_counter() - started)


def writing(raw: list[bytes], scratch: Path) -> float:
    """Records per second of writing the output lines of the records of `raw` lines (encoded beforehand) to a file
    beside the replay's output, as the replay writes them: in blocks of a chunk's lines."""
    blocks = list(encode_all(raw, Replayer()))
    started = time.perf_counter()
    with scratch.open("wb") as out:
        for block in blocks:
            out.write(block)
    elapsed = time.perf_counter() - started
    scratch.unlink()
    return len(raw) / elapsed


def side_by_side(log: Path, most: int) -> float:
    """Records per second of two processes each running `folds_alone` at the same moment, together."""
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        rates = pool.starmap(folds_alone, [(log, most), (log, most)])
    return sum(rate for rate, _ in rates)


if __name__ == "__main__":
    main()
