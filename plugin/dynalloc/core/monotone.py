"""The exact integer min-max split for any nondecreasing costs: the simulator's ceiling.

`dynalloc.core.shares.minmax_shares` is exact for affine costs, whose water level it finds by
bisection on a formula; a measured table has no such formula. But any nondecreasing cost gives
the same structure: at a level T each rank can take every share whose cost is at most T, the
shares that fit grow with T, and the least T at which they reach the global batch is the optimum,
one of the finitely many values the costs take. So the values are listed (each distinct cost
function once: a modelled cluster has a few node types of many identical ranks) and the
optimum is found by bisection among them, exactly.
"""

import numpy as np

from dynalloc.core.shares import equal_shares


def minmax_monotone(costs, counts, global_batch, lows, highs):
    """Integer shares, rank by rank, minimising the slowest rank's cost exactly.

    costs: one nondecreasing function per kind of rank (an int array of shares -> seconds);
    counts: how many ranks of each kind, in rank order; lows, highs: each kind's share bounds.
    Among the optimal splits, the one that gives each rank the fewest samples it can, the
    remainder going to the lowest ranks first (as minmax_shares breaks ties).

    >>> minmax_monotone([lambda b: 1.0 * b, lambda b: 3.0 * b], [1, 1], 8, [1, 1], [8, 8]).tolist()
    [6, 2]
    """
    counts = np.asarray(counts, dtype=np.int64)
    lows, highs = np.asarray(lows, dtype=np.int64), np.asarray(highs, dtype=np.int64)
    owner = np.repeat(np.arange(len(counts)), counts)
    if not lows @ counts <= global_batch <= highs @ counts:
        raise ValueError(
            f"no split of {global_batch} within the bounds: they allow "
            f"{int(lows @ counts)} to {int(highs @ counts)} samples"
        )
    # A feasible split bounds the optimum from above, and so the shares worth listing.
    feasible = equal_shares(len(owner), global_batch, lows[owner].tolist(), highs[owner].tolist())
    ceiling = max(float(np.max(cost(feasible[owner == k]))) for k, cost in enumerate(costs))
    values = []
    for cost, low, high in zip(costs, lows, highs, strict=True):
        listed = np.asarray(cost(np.arange(low, _reach(cost, low, high, ceiling) + 1)), float)
        if np.any(np.diff(listed) < 0):
            raise ValueError("a cost decreases as the share grows: no exact min-max split")
        values.append(listed)

    def fitting(level):  # per kind: how many of its listed shares cost at most `level`
        return np.array([np.searchsorted(v, level, side="right") for v in values])

    floor = max(v[0] for v in values)  # every rank takes its lowest share
    levels = np.unique(np.concatenate(values))
    levels = levels[levels >= floor]
    lo, hi = 0, len(levels) - 1  # levels[hi] is feasible: the split above reaches it
    while lo < hi:
        mid = (lo + hi) // 2
        if (lows + fitting(levels[mid]) - 1) @ counts >= global_batch:
            hi = mid
        else:
            lo = mid + 1
    best = levels[lo]
    cap = (lows + fitting(best) - 1)[owner]
    # Below the optimum each rank holds what fits under it; the rest goes lowest rank first.
    start = lows if lo == 0 else lows + np.array([np.searchsorted(v, best) for v in values]) - 1
    start = start[owner]
    room = cap - start
    before = np.cumsum(room) - room
    return start + np.clip(global_batch - start.sum() - before, 0, room)


def _reach(cost, low, high, level):
    """The largest share in [low, high] that costs at most `level` (low if none does)."""
    if float(cost(np.array([high]))[0]) <= level:
        return int(high)
    lo, hi = int(low), int(high)  # cost(hi) > level
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(cost(np.array([mid]))[0]) <= level:
            lo = mid
        else:
            hi = mid
    return lo
