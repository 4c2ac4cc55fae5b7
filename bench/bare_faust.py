"""The Faust ceiling: an agent that only counts events, draining a backlog (run by bench/e2e.py).

No fold, no outputs, no tables, no transactions: what Faust itself costs to hand an agent each
record, on the same broker, which bounds any Faust worker's throughput. Prints `rate N` (records
per second from the first event to the --count-th) and `cpu N` (its processor time a record, us),
and exits. With BARE_PATH=worker the agent takes its events as `tribunal worker`'s agents do
(`streams.worker.faust_private`: `deliver_as_the_worker` and `events`): the ceiling of tribunal's own
delivery path, whatever the fold, the writes and the commits cost on top of it.
Run: `.venv/bin/python bench/bare_faust.py worker -l warn` with BARE_BOOTSTRAP, BARE_TOPIC, BARE_COUNT set.
"""

from __future__ import annotations

import os
import sys
import time

import faust

from streams.worker import faust_private

WORKER_PATH = os.environ.get("BARE_PATH") == "worker"
if WORKER_PATH:
    faust_private.check()
    faust_private.deliver_as_the_worker()
app = faust.App(f"bare-faust-{os.getpid()}", broker=f"kafka://{os.environ['BARE_BOOTSTRAP']}", store="memory://",
                web_enabled=False, consumer_auto_offset_reset="earliest")
topic = app.topic(os.environ["BARE_TOPIC"], key_type=bytes, value_type=bytes, key_serializer="raw",
                  value_serializer="raw")
COUNT = int(os.environ["BARE_COUNT"])
seen = {"records": 0, "first": 0.0, "cpu": 0.0}


@app.agent(topic)
async def count(stream: faust.StreamT) -> None:
    async for _ in (faust_private.events(app, stream) if WORKER_PATH else stream.events()):
        seen["records"] += 1
        if seen["records"] == 1:
            seen["first"], seen["cpu"] = time.monotonic(), time.process_time()
        elif seen["records"] == COUNT:
            cpu = (time.process_time() - seen["cpu"]) / COUNT * 1e6
            sys.stderr.write(f"cpu {cpu:.1f}\nrate {COUNT / (time.monotonic() - seen['first']):.0f}\n")
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    app.main()
