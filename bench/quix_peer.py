"""Tribunal's worker beside a quixstreams application running the same fold, exactly-once, in one run (issue 49).

Both drain the same backlog of metric envelopes over 20 pools (`e2e.metrics`), each after its pools' policies were
decided, timed from the first record produced to the last output read (read_committed), on the same broker:
tribunal's worker (`e2e.run_phase`, as `bench/e2e.py` runs it) and `bench/quix_app.py`, a quixstreams 3.28
application with `processing_guarantee="exactly-once"`, commit interval and poll timeout at 0.1 s, its own state
store, calling the same compiled `streams.core` fold and producing the same bytes. quixstreams pins pydantic
below 2.14, so it runs from a venv of its own, `bench/.quix-venv`, made here on first use (from PyPI).
Rounds alternate which goes first; the ratio of each round and their median are printed. Each round also drains
the backlog through a bare aiokafka loop with a transactional producer per partition and no fold (`e2e.baseline_loop`):
the fastest exactly-once a group member can run on aiokafka (its offsets commit carries no KIP-447 group metadata,
so fencing needs a producer per input partition, as Faust's), whatever the fold costs on top of it; quixstreams
(librdkafka) commits for all its partitions through one producer. And through a transactional aiokafka loop that runs
the same fold and writes the same bytes, in a process of its own, one producer (`e2e.worker_outputs`): a worker
without Faust, its tables or its state store.
Run: `.venv/bin/python bench/quix_peer.py [--records 20000] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from aiokafka import AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import (  # type: ignore[import-not-found]
    Phase,
    collect,
    create,
    loop_backlog,
    loop_in_child,
    metrics,
    policies,
    run_phase,
)
from machine import describe, local_stack, ratio  # type: ignore[import-not-found]

from streams.core import pools
from streams.core.source import SourceRecord

HERE = Path(__file__).resolve().parent
VENV = HERE / ".quix-venv"
QUIX = "quixstreams==3.28.1"


def quix_python() -> Path:
    """The interpreter of the quixstreams venv, made (and quixstreams installed) if it is not there yet."""
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([str(python), "-m", "pip", "install", "-q", QUIX, "immutables", "mypy_extensions", "pyyaml"],
                       check=True)
    return python


def expected_outputs(records: list[tuple[bytes, bytes]]) -> int:
    """How many `ScalingDecision` and `PoolInstances` records the fold writes for the policies and `records`."""
    states: dict[bytes, pools.PoolState] = {}
    count = 0
    inputs = [(pools.POLICIES, key, value) for key, value in policies()]
    for offset, (topic, key, value) in enumerate([*inputs, *((pools.PLUGIN_DECIDER, k, v) for k, v in records)]):
        state, outputs = pools.apply(states.get(key) or pools.PoolState(),
                                     SourceRecord(topic, 0, offset, 0, key, value), topic)
        states[key] = state
        count += sum(o.stream in (pools.SCALING_DECISIONS, pools.POOL_INSTANCES) for o in outputs)
    return count


async def produce_logical(bootstrap: str, topic: str, logical: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    await producer.start()
    try:
        sent = [await producer.send(topic, value, key=key, headers=[("topic", logical.encode())])
                for key, value in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def quix_round(bootstrap: str, index: int, records: int, home: Path) -> float:
    name = f"quix{index}"
    asyncio.run(create(bootstrap, [f"{name}-in", f"{name}-out"]))
    backlog = metrics(records, index + 1)
    first = expected_outputs([])
    total = expected_outputs(backlog)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "QUIX_BOOTSTRAP": bootstrap, "QUIX_IN": f"{name}-in",
           "QUIX_OUT": f"{name}-out", "QUIX_GROUP": name, "QUIX_STATE_DIR": str(home / name)}
    with (home / f"{name}.log").open("wb") as log:
        app = subprocess.Popen([str(quix_python()), str(HERE / "quix_app.py")], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        asyncio.run(produce_logical(bootstrap, f"{name}-in", pools.POLICIES, policies()))
        asyncio.run(collect(bootstrap, f"{name}-out", first, 300))
        started = time.monotonic()

        async def backlog_through() -> None:
            reading = asyncio.create_task(collect(bootstrap, f"{name}-out", total, 900))
            await produce_logical(bootstrap, f"{name}-in", pools.PLUGIN_DECIDER, backlog)
            await reading

        asyncio.run(backlog_through())
        return records / (time.monotonic() - started)
    finally:
        app.terminate()
        app.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    quix_python()
    ratios, ceilings, folds = [], [], []
    with local_stack("quix-peer") as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap, home = cluster.topology.bootstrap, cluster.topology.home
        broker = cluster.pid(cluster.servers()[1])
        assert broker is not None
        for i in range(args.rounds):
            order = ("tribunal", "quix") if i % 2 == 0 else ("quix", "tribunal")
            rates = {}
            for who in order:
                if who == "tribunal":
                    rates[who] = asyncio.run(run_phase(bootstrap, Phase("backlog, exactly-once", args.records),
                                                       100 + i, home)).throughput
                else:
                    rates[who] = quix_round(bootstrap, i, args.records, Path(tmp))
            loop = asyncio.run(loop_backlog(bootstrap, f"pquix{i}", args.records, True, per_partition=True))
            folding = loop_in_child(bootstrap, f"fquix{i}", args.records, False, broker, "fold")[0]
            ratios.append(rates["tribunal"] / rates["quix"])
            ceilings.append(loop / rates["quix"])
            folds.append(folding / rates["quix"])
            print(f"round {i + 1}: tribunal {rates['tribunal']:,.0f}/s, quixstreams {rates['quix']:,.0f}/s, "
                  f"ratio {ratios[-1]:.2f}; the aiokafka loop with a producer per partition, no fold, {loop:,.0f}/s: "
                  f"{ceilings[-1]:.2f} of quixstreams; the transactional aiokafka loop running the same fold and "
                  f"writing the same bytes, {folding:,.0f}/s: {folds[-1]:.2f} of quixstreams", flush=True)
    print(f"{describe()}; {args.records} records backlog, exactly-once, {args.rounds} rounds")
    print(f"tribunal / quixstreams running the same fold: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}); the aiokafka loop with a producer per partition and no fold / "
          f"quixstreams: median {statistics.median(ceilings):.2f} ({min(ceilings):.2f}-{max(ceilings):.2f}); the "
          f"aiokafka loop running the fold / quixstreams: median {statistics.median(folds):.2f} "
          f"({min(folds):.2f}-{max(folds):.2f})")
    ratio("worker exactly-once backlog / quixstreams on the same fold, exactly-once", ratios)


if __name__ == "__main__":
    main()
