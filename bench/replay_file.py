"""`tribunal replay` over a generated log of a million records: records per second, one process.

The log holds a decider policy for each of 20 pools (10 apps each), then metric envelopes for
random apps and pools, with 1% malformed records (they go to the DLQ lines). It is written once
to --log, then replayed by the CLI exactly as a user runs it, and timed end to end.
Run: `.venv/bin/python bench/replay_file.py [--records 1000000]`.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from core_fold import policy  # type: ignore[import-not-found]
from machine import describe  # type: ignore[import-not-found]

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))


def generate(path: Path, records: int, pools: int = 20, apps: int = 10, seed: int = 11) -> None:
    rng = random.Random(seed)
    with path.open("w") as out:
        for p in range(pools):
            out.write(json.dumps({"topic": "policies", "partition": p % 4, "offset": p, "timestamp": 0,
                                  "key": f"pool-{p:02d}", "value": policy(apps)}) + "\n")
        offsets = [0] * 4
        for i in range(records - pools):
            p = rng.randrange(pools)
            part = p % 4
            row = {"topic": "plugin_decider", "partition": part, "offset": offsets[part],
                   "timestamp": 1_732_200_000_000 + i, "key": f"pool-{p:02d}"}
            offsets[part] += 1
            if rng.random() < 0.01:
                row["value_b64"] = base64.b64encode(b"{broken").decode()
                row["value"] = "{broken"
            else:
                body = json.dumps({"App": f"app{rng.randrange(apps):04d}", "Metrical": rng.randrange(101)})
                row["value"] = {"Command": "app-metrical", "Channel": "plugin_decider", "Body": body}
            out.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=0, help="replay's processes (0: one per core)")
    parser.add_argument("--log", type=Path, default=Path(__file__).resolve().parent / "results" / "replay-log.jsonl")
    args = parser.parse_args()
    args.log.parent.mkdir(parents=True, exist_ok=True)
    if not args.log.exists() or sum(1 for _ in args.log.open()) != args.records:
        generate(args.log, args.records)
    out = args.log.with_suffix(".out.jsonl")
    started = time.perf_counter()
    proc = subprocess.run([TRIBUNAL, "replay", "--input", str(args.log), "--output", str(out),
                           "--jobs", str(args.jobs)],
                          capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - started
    print(describe())
    print(proc.stderr.strip())
    sizes = f"input {args.log.stat().st_size / 1e6:.0f} MB, output {out.stat().st_size / 1e6:.0f} MB"
    print(f"tribunal replay: {args.records:,} records in {elapsed:.1f}s wall = {args.records / elapsed:,.0f} records/s "
          f"({sizes}, --jobs {args.jobs})")


if __name__ == "__main__":
    main()
