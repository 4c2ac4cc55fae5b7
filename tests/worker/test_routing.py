"""Forwarding a record to its key's partition keeps everything the fold needs, exactly (no broker)."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from streams.core.source import SourceRecord
from streams.kafka import partition_for
from streams.worker.routing import ORIGIN, NotForwarded, forward, original


@given(st.text(min_size=1), st.integers(1, 64))
def test_the_home_partition_is_the_one_kafkas_default_partitioner_gives(key: str, partitions: int) -> None:
    everything = list(range(partitions))
    assert partition_for(key, partitions) == DefaultPartitioner()(key.encode(), everything, everything)


@given(st.sampled_from(["plugin_decider", "p.job-events"]), st.integers(0, 99), st.integers(0, 2**40),
       st.integers(1, 2**42), st.one_of(st.none(), st.binary()), st.one_of(st.none(), st.binary()),
       st.integers(0, 15))
def test_the_forwarded_record_is_read_back_as_the_original(topic: str, partition: int, offset: int, timestamp: int,
                                                           key: bytes | None, value: bytes | None, home: int) -> None:
    record = SourceRecord(topic, partition, offset, timestamp, key, value)
    sent = forward(record, "the-pool", "pools.repartition", home)
    assert (sent.topic, sent.key, sent.value, sent.partition) == ("pools.repartition", b"the-pool", value, home)
    assert original("pools.repartition", home, 7, sent.key, sent.value, sent.headers) == record


def test_a_record_without_an_origin_is_not_taken_for_a_forward() -> None:
    for headers in (None, [], [(ORIGIN, b"nonsense")], [(ORIGIN, b"\xff")]):
        with pytest.raises(NotForwarded):
            original("pools.repartition", 0, 3, b"k", b"v", headers)
