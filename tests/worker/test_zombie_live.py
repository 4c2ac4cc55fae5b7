"""A zombie worker (issue 48): one of two workers in a network namespace of its own, its link to the brokers cut
in the middle of its batches while metrics stream in (`tests.netns`), the other on the host.

First a cut shorter than the group's session: nothing moves. Then a cut past it: the group gives the cut-off
worker's partitions to the other, whose transactional producers (the same transactional ids, one per input
partition) fence the zombie's and abort what it had open. Healed, the zombie finds itself fenced and rejoins.
Afterwards a read_committed consumer sees exactly one decision per input (nothing of the zombie's aborted
batches, nothing lost) and `replay --from-kafka --verify` agrees.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from streams.clients import envelope
from tests.conftest import Stack, env_of
from tests.helpers import Worker, agreed, produce_all, read_committed, tribunal, until, wait_until_ready
from tests.netns import Network
from tests.worker.test_crash import decided_exactly_once, pool_policy

POOLS, RECORDS, RATE = 20, 9_000, 300
SESSION = 6.0  # seconds until the group gives a silent worker's partitions to the other
ASSIGNED = "Setting newly assigned partitions"  # aiokafka's line at each assignment a worker takes


def test_a_worker_cut_off_mid_batch_is_fenced_and_nothing_is_decided_twice_or_lost(
        net_stack: Stack, network: Network, unique: str, tmp_path: Path) -> None:
    kafka, p = net_stack.bootstrap, f"{unique}."
    space = network.namespace()
    base = {**env_of(kafka, unique, tmp_path), "TRIBUNAL_SESSION_TIMEOUT": str(SESSION)}
    tribunal("topics", "create", env=base)
    zombie = Worker({**base, "TRIBUNAL_DATA_DIR": str(tmp_path / "zombie")}, tmp_path / "zombie.log",
                    wrap=space.wrap([]))
    other = Worker({**base, "TRIBUNAL_DATA_DIR": str(tmp_path / "other"), "TRIBUNAL_WEB_PORT": str(
        int(base["TRIBUNAL_WEB_PORT"]) + 1)}, tmp_path / "other.log")
    try:
        zombie.start()
        wait_until_ready(zombie, 1)
        other.start()
        wait_until_ready(other, 1)
        asyncio.run(produce_all(kafka, [(p + "policies", f"pool-{i:02d}".encode(), json.dumps(pool_policy(i)).encode())
                                        for i in range(POOLS)]))
        assert len(asyncio.run(read_committed(kafka, p + "scaling-decisions", POOLS, timeout=120))) == POOLS
        metrics = [(p + "plugin_decider", f"pool-{i % POOLS:02d}".encode(),
                    envelope(("ats", "hadoop", "redis", "spark")[i % 4], (i * 37) % 101, "plugin_decider"))
                   for i in range(RECORDS)]
        produced: list[tuple[int, int]] = []
        producer = threading.Thread(target=lambda: produced.extend(asyncio.run(produce_all(kafka, metrics, RATE))))
        producer.start()

        time.sleep(4)
        assigned = other.log().count(ASSIGNED)
        space.cut()  # shorter than the session: nothing moves
        time.sleep(2)
        space.heal()
        time.sleep(SESSION)
        short_moved = other.log().count(ASSIGNED) - assigned

        space.cut()  # past the session, mid-batch: the other takes its partitions and fences it
        cut = time.monotonic()
        until(lambda: other.log().count(ASSIGNED) > assigned + short_moved, lambda: other.log()[-3000:], 60)
        taken = time.monotonic() - cut
        time.sleep(6)
        space.heal()
        wait_until_ready(zombie, 2)  # fenced, it restarted in place and rejoined the group
        producer.join()
        expected = POOLS + RECORDS
        got = [json.loads(r.value) for r in asyncio.run(read_committed(kafka, p + "scaling-decisions", expected,
                                                                       timeout=300))]
        logs = f"--- zombie\n{zombie.log()[-4000:]}\n--- other\n{other.log()[-3000:]}"
        print(f"short cut moved {short_moved}; partitions taken {taken:.1f} s after the cut")
        decided_exactly_once(got, p + "plugin_decider", produced, expected, logs)
        verified = tribunal("audit", "replay", "--from-kafka", "--verify", env=base)
        assert agreed(verified.stdout, expected) > expected, logs
        assert short_moved == 0, logs
        assert "this worker was fenced: another worker took its partitions" in zombie.log(), logs
    finally:
        zombie.stop()
        other.stop()
        space.heal()
