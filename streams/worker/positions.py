"""The continuity guard's decisions, free of I/O: where each input partition stands, and what to do
with the record Faust hands over next.

Kept apart from `streams.worker.continuity` (which asks the broker and seeks Faust's consumer) so
that every rule can be tested without a broker (tests/worker/test_positions.py drives it with
adversarial deliveries). The rules, per input partition within one consumer group generation:

* The first record admitted is at the group's committed offset; each next one at the offset after
  the last admitted. The guard does not know the committed offset until asked (`AskCommitted`).
* A record below the next offset was folded already in this generation (a refetch): dropped.
* A record above it may follow a legitimate hole (compaction, transaction markers) or records Faust
  skipped. Only the broker can tell (`AskHeld`: the first offset it holds in between). If it holds
  none, the record is admitted; otherwise the record is dropped and the partition rewound there,
  and every arrival before that offset's is dropped (and, when it lies beyond, rewound again, since
  its arrival moved Faust's read position past the awaited offset).
* An offset may be committed only once the effects of its record went into the transaction
  (`done`), and only for records admitted in the current generation.
* A new generation forgets everything: the new assignment starts from the committed offsets. An
  answer to a question asked in an older generation decides nothing (`Stale`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Partition = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class Admit:
    """Fold the record."""


@dataclass(frozen=True)
class Drop:
    """Let the record go unacknowledged; seek the partition back to `seek` if set."""

    seek: int | None = None


@dataclass(frozen=True)
class Stale:
    """The group rebalanced while the guard waited for an answer: neither fold nor drop the record
    (its partition is delivered again from the committed offset, to whichever worker owns it)."""


@dataclass(frozen=True)
class AskCommitted:
    """Answer with `Positions.committed`: the group's committed offset of the partition."""


@dataclass(frozen=True)
class AskHeld:
    """Answer with `Positions.held`: the first offset the broker holds in [start, before), or None."""

    start: int
    before: int


Verdict = Admit | Drop | Stale | AskCommitted | AskHeld
ADMIT, DROP, STALE = Admit(), Drop(), Stale()


@dataclass
class Positions:
    """Each input partition's next offset to admit, offset to commit, and offset awaited after a rewind."""

    generation: int | None = None
    _next: dict[Partition, int] = field(default_factory=dict)
    _done: dict[Partition, int] = field(default_factory=dict)
    _rewinding: dict[Partition, int] = field(default_factory=dict)

    def arrive(self, tp: Partition, offset: int, generation: int | None) -> Verdict:
        """Faust handed the record at `offset` of `tp`, in consumer group `generation`."""
        if generation != self.generation:
            self._next.clear()
            self._done.clear()
            self._rewinding.clear()
            self.generation = generation
        awaited = self._rewinding.get(tp)
        if awaited is not None:
            if offset == awaited:  # the broker holds nothing between the next offset and this one
                del self._rewinding[tp]
                return self._admit(tp, offset)
            return Drop(seek=awaited) if offset > awaited else DROP
        expected = self._next.get(tp)
        if expected is None:
            return AskCommitted()
        if offset < expected:
            return DROP
        if offset > expected:
            return AskHeld(expected, offset)
        return self._admit(tp, offset)

    def committed(self, tp: Partition, offset: int, generation: int | None, committed: int) -> Verdict:
        """The answer to `AskCommitted` for the record at `offset`: the group's committed offset."""
        if generation != self.generation:
            return STALE
        self._next.setdefault(tp, committed)
        return self.arrive(tp, offset, generation)

    def held(self, tp: Partition, offset: int, generation: int | None, first: int | None) -> Verdict:
        """The answer to `AskHeld` for the record at `offset`: the first offset held before it, if any."""
        if generation != self.generation:
            return STALE
        if first is None:
            return self._admit(tp, offset)
        self._rewinding[tp] = first
        return Drop(seek=first)

    def done(self, tp: Partition, offset: int, generation: int | None) -> None:
        """The effects of `tp`'s records up to `offset`, admitted in `generation`, are in the transaction."""
        if generation == self.generation and offset < self._next.get(tp, -1):
            self._done[tp] = max(self._done.get(tp, 0), offset + 1)

    def to_commit(self, tp: Partition) -> int | None:
        """The offset to commit for `tp`: the one after the last record whose effects are in the transaction."""
        return self._done.get(tp)

    def done_offsets(self) -> dict[Partition, int]:
        """`to_commit` of every partition with records done in this generation."""
        return dict(self._done)

    def _admit(self, tp: Partition, offset: int) -> Admit:
        self._next[tp] = offset + 1
        return ADMIT
