"""The continuity guard's decisions (streams/worker/positions.py), without a broker.

The broker's part is played by a list of held offsets (holes stand for compaction and transaction
markers) and a committed offset; Faust's part by a delivery cursor that an adversary moves: it skips
records, refetches old ones, and otherwise delivers the next held record, and it obeys the guard's
seeks. Whatever the adversary does, the guard must admit every held record from the committed
offset once, in order, and let an offset be committed only once its record was folded.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streams.worker import positions as positions_module
from streams.worker.positions import ADMIT, DROP, AskCommitted, AskHeld, Drop, Positions, Stale, Verdict
from tests.core.test_purity import violations

TP = ("metrics", 3)


def resolve(positions: Positions, offset: int, generation: int, held: list[int], committed: int) -> Verdict:
    """Answer the guard's questions as the broker would (what `Continuity.admit` does)."""
    verdict = positions.arrive(TP, offset, generation)
    if isinstance(verdict, AskCommitted):
        verdict = positions.committed(TP, offset, generation, committed)
    if isinstance(verdict, AskHeld):
        first = next((h for h in held if verdict.start <= h < verdict.before), None)
        verdict = positions.held(TP, offset, generation, first)
    return verdict


def test_the_decisions_reach_for_no_io_clock_or_faust() -> None:
    assert violations(Path(positions_module.__file__)) == []


def test_the_first_record_is_admitted_at_the_committed_offset() -> None:
    positions = Positions()
    assert positions.arrive(TP, 5, 1) == AskCommitted()
    assert positions.committed(TP, 5, 1, 5) is ADMIT
    assert positions.arrive(TP, 6, 1) is ADMIT


def test_a_refetched_record_is_dropped_without_a_seek() -> None:
    positions = Positions()
    assert resolve(positions, 0, 1, [0, 1], 0) is ADMIT
    assert resolve(positions, 1, 1, [0, 1], 0) is ADMIT
    assert positions.arrive(TP, 0, 1) is DROP


def test_skipped_records_are_fetched_again_before_anything_after_them() -> None:
    positions = Positions()
    assert resolve(positions, 0, 1, list(range(10)), 0) is ADMIT
    assert positions.arrive(TP, 4, 1) == AskHeld(1, 4)  # Faust skipped 1..3
    assert positions.held(TP, 4, 1, 1) == Drop(seek=1)
    assert positions.arrive(TP, 5, 1) == Drop(seek=1)  # arrived before the rewind took: rewind again
    assert positions.arrive(TP, 0, 1) is DROP  # older than awaited: nothing to rewind
    assert positions.arrive(TP, 1, 1) is ADMIT  # the awaited one, without asking again
    assert positions.arrive(TP, 2, 1) is ADMIT


def test_a_hole_the_broker_really_has_is_stepped_over() -> None:
    positions = Positions()
    assert resolve(positions, 0, 1, [0, 7], 0) is ADMIT
    assert positions.arrive(TP, 7, 1) == AskHeld(1, 7)
    assert positions.held(TP, 7, 1, None) is ADMIT  # 1..6: transaction markers or compacted away


def test_a_new_generation_starts_from_the_committed_offset_and_forgets_what_was_done() -> None:
    positions = Positions()
    assert resolve(positions, 0, 1, [0, 1, 2], 0) is ADMIT
    positions.done(TP, 0, 1)
    assert positions.to_commit(TP) == 1
    assert positions.arrive(TP, 1, 2) == AskCommitted()
    assert positions.to_commit(TP) is None
    assert positions.committed(TP, 1, 2, 0) == AskHeld(0, 1)  # offset 0 was never committed: fetch it again
    assert positions.held(TP, 1, 2, 0) == Drop(seek=0)


def test_an_answer_from_an_older_generation_decides_nothing() -> None:
    positions = Positions()
    assert positions.arrive(TP, 0, 1) == AskCommitted()
    assert positions.arrive(("metrics", 4), 9, 2) == AskCommitted()  # another agent saw the rebalance
    assert isinstance(positions.committed(TP, 0, 1, 0), Stale)
    assert positions.arrive(TP, 0, 2) == AskCommitted()  # nothing was learnt from the stale answer


def test_done_counts_only_admitted_offsets_of_the_current_generation() -> None:
    positions = Positions()
    assert resolve(positions, 0, 1, [0, 1, 2], 0) is ADMIT
    positions.done(TP, 1, 1)  # not admitted yet
    positions.done(TP, 0, 0)  # an older generation's batch
    assert positions.to_commit(TP) is None
    positions.done(TP, 0, 1)
    assert positions.to_commit(TP) == 1


@given(st.data())
def test_every_held_record_is_admitted_once_in_order_whatever_faust_skips(data: st.DataObject) -> None:
    end = data.draw(st.integers(1, 50), label="end")
    held = sorted(data.draw(st.sets(st.integers(0, end - 1), min_size=1), label="held"))
    committed = data.draw(st.integers(0, end), label="committed")
    moves = data.draw(st.lists(st.integers(-6, 6), max_size=30), label="moves")  # 0: deliver the next one
    expected = [h for h in held if h >= committed]
    positions, cursor, admitted = Positions(), committed, []
    for step in range(len(moves) + 3 * len(held) + 10):
        if step < len(moves):
            cursor = max(0, cursor + moves[step])
        offset = next((h for h in held if h >= cursor), None)
        if offset is None:
            if admitted == expected:
                break
            # Records skipped at the tail show no later record to the guard: the stall watchdog sees
            # the committed offset stand while records wait, and restarts the worker from it.
            committed = positions.to_commit(TP) or committed
            positions, cursor = Positions(), committed
            continue
        cursor = offset + 1
        verdict = resolve(positions, offset, 1, held, committed)
        if verdict is ADMIT:
            assert offset not in admitted and all(o < offset for o in admitted)
            admitted.append(offset)
            positions.done(TP, offset, 1)
            assert positions.to_commit(TP) == offset + 1
        else:
            assert isinstance(verdict, Drop)
            if verdict.seek is not None:
                cursor = verdict.seek
    assert admitted == expected
