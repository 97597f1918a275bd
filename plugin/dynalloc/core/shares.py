"""Integer shares of a global batch: the one allocation routine every policy ends in.

Every policy reduces to "minimise the slowest rank's predicted time" for per-rank affine costs
`t_r(b) = a_r + c_r * b`: an equal split is that with identical costs, a split proportional to
weights `w_r` is that with `a_r = 0, c_r = 1 / w_r`. Solving it exactly over integers and bounds in
one place is what guarantees that shares always sum to B and respect `min_share`/`max_share`.

Each bound is one number for all ranks or a sequence of one per rank (a node with less memory
gets a lower `max_share`; a `None` entry leaves that rank uncapped).
"""

import heapq
import numbers

import numpy as np


def per_rank(name, value, ranks, optional=False):
    """The bound `value` of each of `ranks` ranks, as a list: one number repeated, or the
    sequence itself once it has one integer (or, if `optional`, None) per rank; ValueError
    names a wrong length and, with its rank, an entry that is not an integer."""
    if np.ndim(value) == 0:
        return [value] * ranks
    values = list(value)
    if len(values) != ranks:
        raise ValueError(f"{name} has {len(values)} entries for {ranks} ranks")
    for rank, entry in enumerate(values):
        if (entry is None and optional) or (
            isinstance(entry, numbers.Integral) and not isinstance(entry, bool)
        ):
            continue
        allowed = "an integer or None" if optional else "an integer"
        raise ValueError(f"{name} of rank {rank} must be {allowed}, got {entry!r}")
    return values


def share_bounds(ranks, global_batch, min_share=1, max_share=None):
    """Each rank's lowest and highest share as int64 arrays (uncapped: `global_batch`), or
    ValueError unless `ranks` shares within the bounds can sum to `global_batch`."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    lows = per_rank("min_share", min_share, ranks)
    highs = per_rank("max_share", max_share, ranks, optional=True)
    one_min, one_max = np.ndim(min_share) == 0, np.ndim(max_share) == 0
    for rank, low in enumerate(lows):
        if low < 0:
            where = "" if one_min else f" of rank {rank}"
            raise ValueError(f"min_share{where} must be non-negative, got {low}")
    for rank, (low, high) in enumerate(zip(lows, highs, strict=True)):
        if high is not None and high < low:
            where = "" if one_min and one_max else f" for rank {rank}"
            raise ValueError(f"max_share {high} is below min_share {low}{where}")
    if one_min and global_batch < ranks * min_share:
        raise ValueError(
            f"global batch {global_batch} is smaller than ranks x min_share = {ranks} x {min_share}"
        )
    if not one_min and global_batch < sum(lows):
        raise ValueError(
            f"global batch {global_batch} is smaller than the sum of min_share "
            f"{[int(v) for v in lows]} = {sum(lows)}"
        )
    if one_max and max_share is not None and global_batch > ranks * max_share:
        raise ValueError(
            f"global batch {global_batch} exceeds ranks x max_share = {ranks} x {max_share}"
        )
    if not one_max and None not in highs and global_batch > sum(highs):
        raise ValueError(
            f"global batch {global_batch} exceeds the sum of max_share "
            f"{[int(v) for v in highs]} = {sum(highs)}"
        )
    lo = np.array(lows, dtype=np.int64)
    hi = np.array([global_batch if v is None else v for v in highs], dtype=np.int64)
    return lo, hi


def check_bounds(ranks, global_batch, min_share=1, max_share=None):
    """Raise ValueError unless `ranks` shares within the bounds can sum to `global_batch`."""
    share_bounds(ranks, global_batch, min_share, max_share)


def minmax_shares(intercepts, slopes, global_batch, min_share=1, max_share=None):
    """Integer shares minimising `max_r intercepts[r] + slopes[r] * shares[r]` exactly.

    Shares sum to `global_batch` and lie in `[min_share, max_share]` (each bound one number for
    all ranks or one per rank, `share_bounds`). Ties go to the lower rank, so every rank computes
    the same answer from the same numbers.

    >>> minmax_shares([0.0, 0.0], [1.0, 3.0], 8).tolist()
    [6, 2]
    """
    a = np.asarray(intercepts, dtype=float)
    c = np.asarray(slopes, dtype=float)
    ranks = len(a)
    if a.shape != (ranks,) or c.shape != (ranks,):
        raise ValueError(f"need one intercept and one slope per rank, got {a.shape} and {c.shape}")
    lo, hi = share_bounds(ranks, global_batch, min_share, max_share)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(c)) and np.all(c > 0)):
        raise ValueError("cost model needs finite intercepts and positive finite slopes")

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
    """The static split of MXNet dist_sync, Horovod and DDP: remainders go to the lowest ranks
    (per-rank bounds move the samples a capped or raised rank cannot take to the others)."""
    return proportional_shares(np.ones(ranks), global_batch, min_share, max_share)


def batchnorm_floor(ranks, global_batch, min_share=1, max_share=None, floor=8):
    """The lower bounds that keep BatchNorm meaningful: BatchNorm in training mode normalises
    each feature over the rank's own samples, so a share of one sample becomes all zeros and a
    share of a few is mostly noise. Each rank's `min_share` raised to `floor`, as far as the
    global batch and the caps allow (an equal split at worst); a list when any bound is one."""
    low, high = share_bounds(ranks, global_batch, min_share, max_share)
    reachable = min(floor, global_batch // ranks)
    raised = np.minimum(np.maximum(low, reachable), high)
    if np.ndim(min_share) == 0 and np.ndim(max_share) == 0 and np.all(raised == raised[0]):
        return int(raised[0])
    return [int(value) for value in raised]
