"""How `dispatch-before-56.inputs.jsonl` was made (issue 56): two dispatcher namespaces' commands and ticks, every
kind of command (caps of the namespace and of a worker, assigns of one and of many jobs, due now and later,
finishes and failures with and without an attempt, late reports, cancels of pending and running jobs, timeouts and
retries), none of them naming a `principal`. Its outputs, `dispatch-before-56.outputs.jsonl`, were written by
`tribunal audit replay` on the tree before commands could name who sent them; the test replays the inputs on today's
tree and compares the bytes. Run again only to make a new fixture, never to refresh this one."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
T0 = 1_764_400_000_000


def job_uuid(partition: int, offset: int, index: int) -> str:
    """`streams.core.dispatch.job_uuid` for `dispatch-commands` (copied: a fixture's maker must not change)."""
    raw = bytearray(hashlib.sha1(f"tribunal:dispatch-commands:{partition}:{offset}:{index}".encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def main() -> None:
    rng = random.Random(56)
    offsets: dict[str, int] = {}
    lines: list[str] = []
    jobs: dict[str, list[str]] = {"ns-a": [], "ns-b": []}
    now = T0

    def add(topic: str, key: str, value: Any) -> int:
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        lines.append(json.dumps({"topic": topic, "partition": 0, "offset": offset, "timestamp": now,
                                 "key": key, "value": value}))
        return offset

    for ns in jobs:
        add("dispatch-commands", ns, {"type": "MaxThreadsSet", "namespace": ns, "max": 3})
        add("dispatch-commands", ns, {"type": "WorkerMaxSet", "namespace": ns, "worker": "w1", "max": 2})
    for step in range(400):
        now += rng.choice([5, 20, 50, 100])
        ns = rng.choice(["ns-a", "ns-a", "ns-b"])
        roll = rng.random()
        if roll < 0.15:
            n = rng.choice([1, 1, 3, 7])
            start = now + rng.choice([0, 0, 200, 1000])
            specs = [{"external_id": f"j{step}-{i}", "max_retries": rng.choice([0, 1, 2]),
                      "timeout_ms": rng.choice([150, 400, 400, 2_000])} for i in range(n)]
            offset = add("dispatch-commands", ns, {"type": "JobsAssigned", "namespace": ns,
                                                   "worker": rng.choice(["w1", "w2", "w3"]), "start": start,
                                                   "end": start + rng.choice([0, 500]), "jobs": specs,
                                                   "request_id": f"r{step}" if rng.random() < 0.5 else None})
            jobs[ns] += [job_uuid(0, offset, i) for i in range(n)]
        elif roll < 0.45 and jobs[ns]:
            uuid = rng.choice(jobs[ns][-8:])
            attempt = rng.choice([None, None, 1, 2])
            add("dispatch-commands", ns, {"type": "JobFinished", "namespace": ns, "uuid": uuid, "attempt": attempt})
        elif roll < 0.52 and jobs[ns]:
            uuid = rng.choice(jobs[ns][-8:])
            add("dispatch-commands", ns, {"type": "JobFailed", "namespace": ns, "uuid": uuid,
                                          "attempt": rng.choice([None, 1]), "error": "exit status 3"})
        elif roll < 0.56 and jobs[ns]:
            add("dispatch-commands", ns, {"type": "JobCancelled", "namespace": ns, "uuid": rng.choice(jobs[ns])})
        elif roll < 0.59:
            add("dispatch-commands", ns, {"type": "MaxThreadsSet", "namespace": ns, "max": rng.choice([1, 2, 4])})
        elif roll < 0.61:
            add("dispatch-commands", ns, {"type": "WorkerMaxSet", "namespace": ns, "worker": "w2",
                                          "max": rng.choice([0, 1, 3])})
        else:
            add("ticks", ns, {"type": "Tick", "namespace": ns, "now": now})
    (HERE / "dispatch-before-56.inputs.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
