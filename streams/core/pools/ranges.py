"""Where a metrical falls among a policy's ranges: one rule for the decider, justice and `explain`."""

from __future__ import annotations

from schemas.policy import METRICAL_MAX


def in_range(lo: float, hi: float, metrical: float) -> bool:
    """[lo, hi), except that the range ending at the top of the scale holds its end (SPEC §2, §3)."""
    return lo <= metrical < hi or metrical == hi == METRICAL_MAX
