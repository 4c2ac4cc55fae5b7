"""The peer of `bench/quix_peer.py`: a quixstreams application running tribunal's decider fold, exactly-once.

Run by `quix_peer.py` with the interpreter of `bench/.quix-venv` (quixstreams 3.28 pins pydantic below 2.14, so it
cannot share tribunal's venv) and tribunal's sources on PYTHONPATH: it calls the same compiled `streams.core`
fold and writes the same bytes (each `ScalingDecision` and `PoolInstances`), keyed by pool, to one output topic.
Like the worker it keeps each pool's folded state in memory and writes it to its own state store (RocksDB with a
changelog) after every record, as a table entry; it commits every 0.1 s and polls with a 0.1 s timeout, as the
worker does. A record's logical topic (policies or plugin_decider) comes in a header, as both go through one input
topic here. Environment: QUIX_BOOTSTRAP, QUIX_IN, QUIX_OUT, QUIX_GROUP, QUIX_STATE_DIR.
"""

from __future__ import annotations

import os
from typing import Any

from quixstreams import Application, message_context  # type: ignore[import-not-found]

from streams.core import pools
from streams.core.pools.codec import dump_policies, dump_state, policies_changed
from streams.core.source import SourceRecord

KEPT = (pools.SCALING_DECISIONS, pools.POOL_INSTANCES)


def main() -> None:
    app = Application(broker_address=os.environ["QUIX_BOOTSTRAP"], consumer_group=os.environ["QUIX_GROUP"],
                      auto_offset_reset="earliest", processing_guarantee="exactly-once", commit_interval=0.1,
                      consumer_poll_timeout=0.1, state_dir=os.environ["QUIX_STATE_DIR"])
    source = app.topic(os.environ["QUIX_IN"], key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(os.environ["QUIX_OUT"], key_serializer="bytes", value_serializer="bytes")
    states: dict[bytes, pools.PoolState] = {}

    def fold(value: bytes, key: bytes, timestamp: int, headers: Any, state: Any) -> list[bytes]:
        topic = dict(headers or [])["topic"].decode()
        where = message_context()
        before = states.get(key) or pools.PoolState()
        record = SourceRecord(topic, where.partition, where.offset, timestamp, key, value)
        after, outputs = pools.apply(before, record, topic)
        states[key] = after
        state.set("state", dump_state(after))
        if policies_changed(before, after):
            state.set("policies", dump_policies(after))
        return [o.value_bytes() for o in outputs if o.stream in KEPT]

    app.dataframe(source).apply(fold, stateful=True, metadata=True, expand=True).to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
