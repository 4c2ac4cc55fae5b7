"""`tribunal audit replay --from-kafka` over a million records on a local broker: records per second.

The same generated log as bench/replay_file.py (20 pools, 10 apps, 1% malformed) is produced to
`policies` and `plugin_decider` (4 partitions) on a fresh local stack. Then, timed apart:
  read     reading every record back, read_committed, through the audit's reader (one process);
  replay   the CLI as a user runs it: read, order, fold, write the derived outputs.
Run: `.venv/bin/python bench/replay_kafka.py [--records 1000000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from machine import describe, local_stack  # type: ignore[import-not-found]
from replay_file import generate  # type: ignore[import-not-found]

from streams.clients import read_log

TRIBUNAL = str(Path(sys.executable).with_name("tribunal"))


async def load(bootstrap: str, log: Path) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(t, 4, 1) for t in ("policies", "plugin_decider")])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=1 << 20,
                                compression_type=None)
    await producer.start()
    sent = 0
    try:
        pending = []
        with log.open() as lines:
            for line in lines:
                row = json.loads(line)
                value = (base64.b64decode(row["value_b64"]) if "value_b64" in row
                         else json.dumps(row["value"], separators=(",", ":")).encode())
                pending.append(await producer.send(row["topic"], value, key=row["key"].encode(),
                                                   partition=row["partition"]))
                sent += 1
                if len(pending) >= 20_000:
                    await asyncio.gather(*pending)
                    pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with local_stack("replay-kafka") as cluster:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        log = home / "log.jsonl"
        generate(log, args.records)
        started = time.perf_counter()
        sent = asyncio.run(load(bootstrap, log))
        produced = time.perf_counter() - started
        started = time.perf_counter()
        records = asyncio.run(read_log(bootstrap, ["policies", "plugin_decider"]))
        read = time.perf_counter() - started
        assert len(records) == sent, (len(records), sent)
        del records
        out = home / "out.jsonl"
        env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap}
        started = time.perf_counter()
        proc = subprocess.run([TRIBUNAL, "audit", "replay", "--from-kafka", "--output", str(out)], env=env,
                              capture_output=True, text=True, check=True)
        replayed = time.perf_counter() - started
    print(describe())
    print(f"produced {sent:,} records in {produced:.1f}s")
    print(f"read     {sent:,} records in {read:.1f}s = {sent / read:,.0f} records/s")
    print(f"replay   {sent:,} records in {replayed:.1f}s wall = {sent / replayed:,.0f} records/s "
          f"(CLI: read, order, fold, write)")
    print(proc.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
