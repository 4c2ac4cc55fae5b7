"""A toy fold, and all that adding a fold takes: the fold itself and its catalogue entry.

It counts the records of each key on one topic. `tests/worker/test_any_fold.py` names it in
`TRIBUNAL_FOLDS` (its catalogue entry) and runs it live, replays, verifies and explains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from streams.core.admission import admit, reject
from streams.core.deadletter import Rejected
from streams.core.folds import Fold, Table
from streams.core.outputs import Emit
from streams.core.source import SourceRecord, cause_of, record_key

TALLIES = "tallies"
TALLY_COUNTS = "tally-counts"
NONE: Mapping[str, int] = MappingProxyType({})


class Tally(NamedTuple):
    count: int = 0
    seqs: Mapping[str, int] = NONE
    offsets: Mapping[str, int] = NONE
    applied: int = 0

    def next_seq(self, stream: str) -> tuple[Tally, int]:
        seq = self.seqs.get(stream, 0) + 1
        return self._replace(seqs={**self.seqs, stream: seq}), seq


def apply(state: Tally, record: SourceRecord, topic: str) -> tuple[Tally, list[Emit]]:
    admitted = admit(state, record)
    if admitted is None:
        return state, []
    key = record_key(record)
    if not record.value:
        return reject(admitted, record, Rejected("empty_value", "a tally needs a value"), key, admitted=True)
    state, seq = admitted._replace(count=admitted.count + 1).next_seq(TALLY_COUNTS)
    return state, [Emit(TALLY_COUNTS, key, {"type": "TallyCount", "key": key, "count": state.count,
                                            "cause": cause_of(record, state.applied), "seq": seq})]


def load(stored: Mapping[str, Any] | None) -> Tally:
    return Tally(**stored) if stored else Tally()


COUNTER: Fold[Tally] = Fold(
    "counter", (TALLIES,), (TALLY_COUNTS,), frozenset(), Tally, apply, lambda record, topic: record_key(record),
    tables=(Table("counter-state", lambda s: s._asdict()),), load=load,
    describe=lambda key, s: {"key": key, "count": s.count})
