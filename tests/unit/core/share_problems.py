"""What the tests of `dynalloc.core.shares` share: random allocation problems (hypothesis), and
the exact checks of a split (its validity, the best single move, the capacity below a time, brute
force on tiny cases)."""

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Positive magnitudes over the whole range a policy can produce: log-uniform 1e-9..1e6, plus the
# plain float strategy (which likes the range's edges and simple values).
magnitudes = st.one_of(
    st.floats(min_value=-9.0, max_value=6.0).map(lambda e: float(10.0**e)),
    st.floats(min_value=1e-9, max_value=1e6, allow_nan=False, allow_infinity=False),
)


@st.composite
def problems(draw, max_ranks=16, max_batch=100_000):
    """(intercepts, slopes, global_batch, min_share, max_share) with feasible bounds."""
    ranks = draw(st.integers(1, max_ranks))
    global_batch = draw(st.integers(ranks, max_batch))
    min_share = draw(st.integers(0, min(global_batch // ranks, 50)))
    max_share = draw(
        st.one_of(
            st.none(),
            st.integers(max(math.ceil(global_batch / ranks), min_share, 1), global_batch),
        )
    )
    intercepts = draw(st.lists(magnitudes, min_size=ranks, max_size=ranks))
    slopes = draw(st.lists(magnitudes, min_size=ranks, max_size=ranks))
    return intercepts, slopes, global_batch, min_share, max_share


def costs(a, c, shares):
    """Per-rank time, evaluated exactly as `minmax_shares` evaluates it (a + c * b in float64)."""
    return np.asarray(a, float) + np.asarray(c, float) * np.asarray(shares, float)


def assert_valid(shares, ranks, global_batch, min_share, max_share):
    assert isinstance(shares, np.ndarray)
    assert shares.dtype == np.int64
    assert shares.shape == (ranks,)
    assert int(shares.sum()) == global_batch
    assert shares.min() >= min_share
    if max_share is not None:
        assert shares.max() <= max_share


def best_single_move(a, c, shares, lo, hi):
    """The smallest max-time reachable by moving one unit from any rank to any other one
    (`lo`, `hi`: one bound for all ranks or one per rank)."""
    a, c = np.asarray(a, float), np.asarray(c, float)
    lo, hi = np.broadcast_to(lo, len(shares)), np.broadcast_to(hi, len(shares))
    best = math.inf
    for i, j in itertools.permutations(range(len(shares)), 2):
        if shares[i] - 1 < lo[i] or shares[j] + 1 > hi[j]:
            continue
        moved = shares.copy()
        moved[i] -= 1
        moved[j] += 1
        best = min(best, float(costs(a, c, moved).max()))
    return best


def capacity_below(a, c, level, lo, hi):
    """Per rank, the most units whose time stays strictly below `level`; None if even `lo` does
    not. Time is monotone in the share (float rounding is monotone), so a floor estimate corrected
    by stepping is exact for the float costs. `lo`, `hi`: one bound for all ranks, or per rank."""
    caps = []
    lows, highs = np.broadcast_to(lo, len(a)).tolist(), np.broadcast_to(hi, len(a)).tolist()
    for ar, cr, low, high in zip(a, c, lows, highs, strict=True):
        if ar + cr * low >= level:
            return None
        guess = (level - ar) / cr
        s = int(min(max(math.floor(guess), low), high)) if math.isfinite(guess) else high
        while s > low and ar + cr * s >= level:
            s -= 1
        while s < high and ar + cr * (s + 1) < level:
            s += 1
        caps.append(s)
    return caps


def brute_force_optimum(a, c, global_batch, lo, hi):
    ranks = len(a)
    lo, hi = np.broadcast_to(lo, ranks).tolist(), np.broadcast_to(hi, ranks).tolist()
    best = math.inf
    for shares in itertools.product(
        *(range(low, high + 1) for low, high in zip(lo, hi, strict=True))
    ):
        if sum(shares) == global_batch:
            best = min(best, float(costs(a, c, shares).max()))
    return best
