"""Integer shares of a global batch: the one allocation routine every policy ends in.

Every policy reduces to "minimise the slowest rank's predicted time" for per-rank affine costs
`t_r(b) = a_r + c_r * b`: an equal split is that with identical costs, a split proportional to
weights `w_r` is that with `a_r = 0, c_r = 1 / w_r`. Solving it exactly over integers and bounds in
one place is what guarantees that shares always sum to B and respect `min_share`/`max_share`.

Each bound is one number for all ranks or a sequence of one per rank (a node with less memory
gets a lower `max_share`; a `None` entry leaves that rank uncapped).
"""

import math
import numbers

import numpy as np

ONE_AT_A_TIME = 16  # up to this many last samples are handed out one by one (`cheapest_units`)
FEW_RANKS = 8  # up to this many ranks, `water_level` bisects in plain Python floats


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


def minmax_shares(intercepts, slopes, global_batch, min_share=1, max_share=None, *, bounds=None):
    """Integer shares minimising `max_r intercepts[r] + slopes[r] * shares[r]` exactly.

    Shares sum to `global_batch` and lie in `[min_share, max_share]` (each bound one number for
    all ranks or one per rank, `share_bounds`). Ties go to the lower rank, so every rank computes
    the same answer from the same numbers. `bounds`: the (low, high) arrays that `share_bounds`
    gave for these ranks and bounds, so that a policy, which splits after every iteration, checks
    its bounds once.

    >>> minmax_shares([0.0, 0.0], [1.0, 3.0], 8).tolist()
    [6, 2]
    """
    a = np.asarray(intercepts, dtype=float)
    c = np.asarray(slopes, dtype=float)
    ranks = len(a)
    if a.shape != (ranks,) or c.shape != (ranks,):
        raise ValueError(f"need one intercept and one slope per rank, got {a.shape} and {c.shape}")
    if bounds is None:
        bounds = share_bounds(ranks, global_batch, min_share, max_share)
    lo, hi = bounds
    if not (np.isfinite(a) & np.isfinite(c) & (c > 0)).all():
        raise ValueError("cost model needs finite intercepts and positive finite slopes")

    # The water level at which the ranks can take just under B samples; the remaining units
    # then go out greedily: from any level at or below the optimum's, the greedy step is exact
    # for increasing costs.
    # The bounds as floats, like the costs: a ufunc of float64 and int64 arrays costs several
    # times one of two float64 arrays on the few ranks of most runs (NumPy's type resolution).
    flo, fhi = lo.astype(float), hi.astype(float)
    low = water_level(a, c, global_batch, flo, fhi)
    shares = np.minimum(np.maximum(np.floor((low - a) / c), flo), fhi).astype(np.int64)
    return shares + cheapest_units(a, c, shares, hi, global_batch - int(shares.sum()))


def water_level(a, c, global_batch, lo, hi):
    """A level at which the ranks, each taking the most samples whose cost `a + c b` stays
    within it (and within [lo, hi]), take at most `global_batch` and fewer than `ranks` less:
    a bisection that stops there (a dozen halvings; this runs on every rank after every
    iteration)."""
    ranks = len(a)
    low = float((a + c * lo).min())
    high = float((a + c * hi).max())
    if ranks <= FEW_RANKS:  # a few floats: a Python loop costs a fraction of an array pass
        rows = list(zip(a.tolist(), c.tolist(), lo.tolist(), hi.tolist(), strict=True))

        def taken(level):  # the bounds are whole numbers: clamping first floors alike
            return sum(math.floor(min(max((level - ar) / cr, least), most))
                       for ar, cr, least, most in rows)  # fmt: skip
    else:

        def taken(level):
            return np.minimum(np.maximum(np.floor((level - a) / c), lo), hi).sum()

    for _ in range(200):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        took = taken(mid)
        if took <= global_batch:
            low = mid
            if took >= global_batch - ranks:
                break
        else:
            high = mid
    return low


def cheapest_units(a, c, shares, high, units):
    """Per rank, how many of `units` more samples it gets when they are handed out one at a time,
    each to the rank whose next one costs least (ties to the lower rank): the greedy step of
    `minmax_shares`. A few are handed out so, one at a time; many in a few array passes, which
    cost more to set up but not per sample (it is up to one per rank, and thousands of ranks
    run this after every iteration).

    Rank r's j-th further sample costs `a_r + c_r (shares_r + j)`, rising with j, so the greedy
    takes the `units` cheapest (cost, rank) pairs of all ranks' further samples. Each of them
    costs at most the `units`-th cheapest first sample, below which rank r has about
    `floor((level - a_r) / c_r) - shares_r` samples: those are listed, no more than its room or
    `units`, and the cheapest `units` of the list are taken. The list is complete when every
    rank's first sample left off comes after the last one taken; where the floor's rounding
    failed that (costs flat to the last bits), each rank lists a growing slack more.
    """
    taken = np.zeros(len(shares), dtype=np.int64)
    room = np.minimum(high - shares, max(units, 0))
    if units <= ONE_AT_A_TIME:
        cost = np.where(room > 0, a + c * (shares + 1), np.inf)
        for _ in range(units):
            r = int(np.argmin(cost))  # the first of equal costs: the lowest rank
            taken[r] += 1
            more = taken[r] < room[r]
            cost[r] = a[r] + c[r] * (shares[r] + taken[r] + 1) if more else np.inf
        return taken
    first = np.where(room > 0, a + c * (shares + 1), np.inf)
    level = np.partition(first, min(units, len(first)) - 1)[min(units, len(first)) - 1]
    with np.errstate(invalid="ignore", over="ignore"):
        below = np.floor((level - a) / c) - shares  # inf where every rank's room is needed
    slack = 0
    while True:
        listed = np.minimum(np.maximum(below + slack, 0), room).astype(np.int64)
        owner = np.repeat(np.arange(len(shares)), listed)
        step = np.arange(owner.size) - np.repeat(np.cumsum(listed) - listed, listed) + 1
        cost = a[owner] + c[owner] * (shares[owner] + step)
        if owner.size >= units:
            kth = np.partition(cost, units - 1)[units - 1]
            cheaper = np.flatnonzero(cost < kth)
            tied = np.flatnonzero(cost == kth)[: units - cheaper.size]
            chosen = owner[np.concatenate([cheaper, tied])]
            # Complete when each rank's next sample beyond its list, if it has one, comes
            # after the last one taken.
            after = a + c * (shares + listed + 1)
            last = owner[tied[-1]]
            later = (after > kth) | ((after == kth) & (np.arange(len(shares)) >= last))
            if (later | (listed == room)).all():
                return np.bincount(chosen, minlength=len(shares))
        slack = 8 * slack or 1


def proportional_shares(weights, global_batch, min_share=1, max_share=None, *, bounds=None):
    """Integer shares as close to proportional to `weights` as the bounds allow (`bounds` as in
    `minmax_shares`)."""
    w = np.asarray(weights, dtype=float)
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError(f"weights must be positive and finite, got {w.tolist()}")
    return minmax_shares(
        np.zeros_like(w), 1.0 / w, global_batch, min_share, max_share, bounds=bounds
    )


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
