"""Which orphan job is offered to which scheduler: the least loaded online one with room, ties by id."""

from __future__ import annotations

import heapq

from streams.core.groups.state import GroupState, limit


def offers(state: GroupState) -> dict[str, str]:
    """Each orphan (in id order) to the least-loaded online scheduler with room, ties by id.

    k orphans need at most the k lowest ids of any (X, n) bucket, and no bucket above the X at
    which k candidates are reached (the k-th pick is never above it), so the work depends on the
    orphans and the distinct loads, not on how many schedulers the group has.
    """
    if not state.orphans:
        return {}
    K, S = state.K, state.S
    limits_by_n = {n: limit(K, S, n) for n in state.by_n}
    k = len(state.orphans)
    heap: list[tuple[int, str, int]] = []
    cutoff = None
    for x, n in sorted(key for key in state.by_load if key[0] < limits_by_n[key[1]]):
        if cutoff is not None and x > cutoff:
            break
        heap.extend((x, sid, limits_by_n[n]) for sid in heapq.nsmallest(k, state.by_load[(x, n)]))
        if cutoff is None and len(heap) >= k:
            cutoff = x
    heapq.heapify(heap)
    out: dict[str, str] = {}
    for job in sorted(state.orphans):
        if not heap:
            break
        x, sid, big_n = heap[0]
        out[job] = sid
        if x + 1 < big_n:
            heapq.heapreplace(heap, (x + 1, sid, big_n))
        else:
            heapq.heappop(heap)
    return out
