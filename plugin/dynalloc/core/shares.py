"""Integer shares of a global batch: the one allocation routine every policy ends in.

Every policy reduces to "minimise the slowest rank's predicted time" for per-rank affine costs
`t_r(b) = a_r + c_r * b`: an equal split is that with identical costs, a split proportional to
weights `w_r` is that with `a_r = 0, c_r = 1 / w_r`. Solving it exactly over integers and bounds in
one place is what guarantees that shares always sum to B and respect `min_share`/`max_share`.
"""

import heapq

import numpy as np


def check_bounds(ranks, global_batch, min_share=1, max_share=None):
    """Raise ValueError unless `ranks` shares within the bounds can sum to `global_batch`."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if min_share < 0:
        raise ValueError(f"min_share must be non-negative, got {min_share}")
    if max_share is not None and max_share < min_share:
        raise ValueError(f"max_share {max_share} is below min_share {min_share}")
    if global_batch < ranks * min_share:
        raise ValueError(
            f"global batch {global_batch} is smaller than ranks x min_share = {ranks} x {min_share}"
        )
    if max_share is not None and global_batch > ranks * max_share:
        raise ValueError(
            f"global batch {global_batch} exceeds ranks x max_share = {ranks} x {max_share}"
        )


def minmax_shares(intercepts, slopes, global_batch, min_share=1, max_share=None):
    """Integer shares minimising `max_r intercepts[r] + slopes[r] * shares[r]` exactly.

    Shares sum to `global_batch` and lie in `[min_share, max_share]`. Ties go to the lower rank,
    so every rank computes the same answer from the same numbers.

    >>> minmax_shares([0.0, 0.0], [1.0, 3.0], 8).tolist()
    [6, 2]
    """
    a = np.asarray(intercepts, dtype=float)
    c = np.asarray(slopes, dtype=float)
    ranks = len(a)
    if a.shape != (ranks,) or c.shape != (ranks,):
        raise ValueError(f"need one intercept and one slope per rank, got {a.shape} and {c.shape}")
    check_bounds(ranks, global_batch, min_share, max_share)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(c)) and np.all(c > 0)):
        raise ValueError("cost model needs finite intercepts and positive finite slopes")
    hi = np.full(ranks, global_batch if max_share is None else max_share, dtype=np.int64)
    lo = np.full(ranks, min_share, dtype=np.int64)

    def units_within(level):
        # The most samples each rank can take without exceeding `level` (inputs are finite).
        return np.minimum(np.maximum(np.floor((level - a) / c), lo), hi)

    # Bisect for a water level at which the ranks can take just under B samples, then hand out
    # the remaining units greedily: from any level at or below the optimum's, the greedy step is
    # exact for increasing costs, so the bisection stops once fewer than `ranks` units remain
    # (a dozen halvings; this runs on every rank after every iteration).
    low = float(np.min(a + c * lo))
    high = float(np.max(a + c * hi))
    for _ in range(200):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        taken = units_within(mid).sum()
        if taken <= global_batch:
            low = mid
            if taken >= global_batch - ranks:
                break
        else:
            high = mid
    shares = units_within(low).astype(np.int64)
    heap = [(a[r] + c[r] * (shares[r] + 1), r) for r in range(ranks) if shares[r] < hi[r]]
    heapq.heapify(heap)
    for _ in range(global_batch - int(shares.sum())):
        _, r = heapq.heappop(heap)
        shares[r] += 1
        if shares[r] < hi[r]:
            heapq.heappush(heap, (a[r] + c[r] * (shares[r] + 1), r))
    return shares


def proportional_shares(weights, global_batch, min_share=1, max_share=None):
    """Integer shares as close to proportional to `weights` as the bounds allow."""
    w = np.asarray(weights, dtype=float)
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError(f"weights must be positive and finite, got {w.tolist()}")
    return minmax_shares(np.zeros_like(w), 1.0 / w, global_batch, min_share, max_share)


def equal_shares(ranks, global_batch, min_share=1, max_share=None):
    """The static split of MXNet dist_sync, Horovod and DDP: remainders go to the lowest ranks."""
    return proportional_shares(np.ones(ranks), global_batch, min_share, max_share)
