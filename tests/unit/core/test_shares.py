"""`dynalloc.core.shares`: exact integer min-max allocation of a global batch, bounds, ties,
errors."""

import itertools
import math

import numpy as np
import pytest
from dynalloc.core.shares import (
    batchnorm_floor,
    check_bounds,
    equal_shares,
    minmax_shares,
    proportional_shares,
    share_bounds,
)
from hypothesis import HealthCheck, assume, given, settings
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


def test_docstring_example():
    assert minmax_shares([0.0, 0.0], [1.0, 3.0], 8).tolist() == [6, 2]


@pytest.mark.parametrize(
    ("ranks", "global_batch", "expected"),
    [
        (1, 7, [7]),
        (3, 10, [4, 3, 3]),
        (3, 11, [4, 4, 3]),
        (3, 9, [3, 3, 3]),
        (4, 7, [2, 2, 2, 1]),
        (5, 5, [1, 1, 1, 1, 1]),
        (16, 100_000, [6250] * 16),
        (16, 100_007, [6251] * 7 + [6250] * 9),
    ],
)
def test_equal_shares_give_remainders_to_the_lowest_ranks(ranks, global_batch, expected):
    shares = equal_shares(ranks, global_batch)
    assert shares.dtype == np.int64
    assert shares.tolist() == expected


def test_equal_shares_respect_bounds():
    assert equal_shares(3, 10, min_share=0).tolist() == [4, 3, 3]
    assert equal_shares(2, 10, min_share=5, max_share=5).tolist() == [5, 5]


def test_proportional_shares_are_proportional_when_exact():
    assert proportional_shares([1, 2, 3, 4], 100).tolist() == [10, 20, 30, 40]
    assert proportional_shares([3.0, 1.0], 8).tolist() == [6, 2]
    # Scale does not matter.
    assert proportional_shares([3e-7, 1e-7], 8).tolist() == [6, 2]


def test_proportional_shares_clamp_to_bounds():
    # Unbounded, rank 1 would get 1 of 100; min_share lifts it to 10 and rank 0 keeps the rest.
    assert proportional_shares([99, 1], 100, min_share=10).tolist() == [90, 10]
    # max_share caps the fast rank; the rest go to the others, in proportion.
    assert proportional_shares([8, 1, 1], 100, max_share=50).tolist() == [50, 25, 25]


def test_ties_between_different_costs_go_to_the_lower_rank():
    # Times b0 and 0.5 * b1: with 5 samples both [2, 3] and [1, 4] reach the optimum 2.
    assert minmax_shares([0.0, 0.0], [1.0, 0.5], 5).tolist() == [2, 3]
    # Two identical slow ranks and a fast one: with 6 samples [2, 1, 3], [1, 2, 3] and [1, 1, 4]
    # all reach the optimum 4; the spare unit goes to rank 0.
    assert minmax_shares([0.0, 0.0, 0.0], [2.0, 2.0, 1.0], 5).tolist() == [1, 1, 3]
    assert minmax_shares([0.0, 0.0, 0.0], [2.0, 2.0, 1.0], 6).tolist() == [2, 1, 3]


def test_intercepts_move_shares_away_from_slow_starters():
    # Rank 0 starts 10 s late; both finish at 20 s with shares 10 and 20.
    assert minmax_shares([10.0, 0.0], [1.0, 1.0], 30).tolist() == [10, 20]
    # An intercept so large that rank 0 only gets its minimum.
    assert minmax_shares([1e6, 0.0], [1.0, 1.0], 1000, min_share=3).tolist() == [3, 997]


@FAST
@given(problems())
def test_minmax_shares_are_valid_and_optimal(problem):
    a, c, global_batch, min_share, max_share = problem
    ranks = len(a)
    hi = global_batch if max_share is None else max_share
    shares = minmax_shares(a, c, global_batch, min_share, max_share)
    assert_valid(shares, ranks, global_batch, min_share, max_share)
    current = float(costs(a, c, shares).max())
    # No single move improves the slowest rank...
    assert current <= best_single_move(a, c, shares, min_share, hi)
    # ...and no allocation at all does: below `current` the ranks cannot hold the whole batch.
    caps = capacity_below(a, c, current, min_share, hi)
    assert caps is None or sum(caps) < global_batch


@FAST
@given(problems())
def test_minmax_shares_are_deterministic(problem):
    a, c, global_batch, min_share, max_share = problem
    first = minmax_shares(a, c, global_batch, min_share, max_share)
    again = minmax_shares(np.array(a), np.array(c), global_batch, min_share, max_share)
    assert first.tolist() == again.tolist()


@settings(max_examples=300, deadline=None)
@given(problems(max_ranks=3, max_batch=12))
def test_minmax_shares_match_brute_force_on_tiny_cases(problem):
    a, c, global_batch, min_share, max_share = problem
    hi = global_batch if max_share is None else max_share
    shares = minmax_shares(a, c, global_batch, min_share, max_share)
    assert_valid(shares, len(a), global_batch, min_share, max_share)
    assert float(costs(a, c, shares).max()) == brute_force_optimum(
        a, c, global_batch, min_share, hi
    )


@FAST
@given(
    st.integers(1, 16).flatmap(
        lambda r: st.tuples(
            st.just(r), st.integers(r, 100_000), st.integers(0, 3), magnitudes, magnitudes
        )
    )
)
def test_identical_ranks_differ_by_at_most_one_and_lower_ranks_get_more(args):
    ranks, global_batch, min_share, a, c = args
    assume(global_batch >= ranks * min_share)
    shares = minmax_shares([a] * ranks, [c] * ranks, global_batch, min_share)
    assert_valid(shares, ranks, global_batch, min_share, None)
    assert shares.tolist() == equal_shares(ranks, global_batch, min_share).tolist()
    assert all(0 <= shares[i] - shares[i + 1] <= 1 for i in range(ranks - 1))
    assert shares.max() - shares.min() <= 1


@FAST
@given(problems())
def test_identical_costs_never_favour_a_higher_rank(problem):
    a, c, global_batch, min_share, max_share = problem
    # Give rank 0 and the last rank the same cost; the lower one must get at least as much.
    a[-1], c[-1] = a[0], c[0]
    shares = minmax_shares(a, c, global_batch, min_share, max_share)
    assert 0 <= shares[0] - shares[-1] <= 1


@FAST
@given(problems())
def test_proportional_shares_are_minmax_with_inverse_weights(problem):
    _, weights, global_batch, min_share, max_share = problem
    shares = proportional_shares(weights, global_batch, min_share, max_share)
    assert_valid(shares, len(weights), global_batch, min_share, max_share)
    expected = minmax_shares(
        np.zeros(len(weights)), 1.0 / np.asarray(weights), global_batch, min_share, max_share
    )
    assert shares.tolist() == expected.tolist()
    # Unbounded, this is Jefferson's divisor method: never below the lower quota, and above the
    # exact proportional split by less than the number of ranks.
    if min_share == 0 and max_share is None:
        exact = global_batch * np.asarray(weights) / np.sum(weights)
        slack = 1e-9 * global_batch
        assert np.all(shares > exact - 1 - slack)
        assert np.all(shares < exact + len(weights) + slack)


@FAST
@given(
    st.integers(1, 16).flatmap(
        lambda r: st.tuples(
            st.just(r),
            st.integers(r, 100_000),
            st.integers(0, 20),
            st.one_of(st.none(), st.integers(1, 100_000)),
        )
    )
)
def test_equal_shares_valid_and_balanced(args):
    ranks, global_batch, min_share, max_share = args
    feasible = global_batch >= ranks * min_share and (
        max_share is None or (max_share >= min_share and global_batch <= ranks * max_share)
    )
    if not feasible:
        with pytest.raises(ValueError):
            equal_shares(ranks, global_batch, min_share, max_share)
        return
    shares = equal_shares(ranks, global_batch, min_share, max_share)
    assert_valid(shares, ranks, global_batch, min_share, max_share)
    base, extra = divmod(global_batch, ranks)
    assert shares.tolist() == [base + 1] * extra + [base] * (ranks - extra)


@pytest.mark.parametrize(
    ("ranks", "global_batch", "min_share", "max_share", "fragment"),
    [
        (0, 10, 1, None, "ranks must be at least 1"),
        (-1, 10, 1, None, "ranks must be at least 1"),
        (2, 10, -1, None, "min_share must be non-negative"),
        (2, 10, 3, 2, "below min_share"),
        (4, 7, 2, None, "smaller than ranks x min_share"),
        (3, 2, 1, None, "smaller than ranks x min_share"),
        (2, 11, 1, 5, "exceeds ranks x max_share"),
    ],
)
def test_infeasible_bounds_raise(ranks, global_batch, min_share, max_share, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_bounds(ranks, global_batch, min_share, max_share)
    if ranks >= 1:
        with pytest.raises(ValueError, match=fragment):
            equal_shares(ranks, global_batch, min_share, max_share)
        with pytest.raises(ValueError, match=fragment):
            minmax_shares([0.0] * ranks, [1.0] * ranks, global_batch, min_share, max_share)
        with pytest.raises(ValueError, match=fragment):
            proportional_shares([1.0] * ranks, global_batch, min_share, max_share)


@pytest.mark.parametrize(
    ("ranks", "global_batch", "min_share", "max_share"),
    [(1, 1, 1, None), (1, 5, 0, 5), (4, 8, 2, 2), (3, 10, 0, 4), (2, 10, 5, None)],
)
def test_boundary_feasible_bounds_pass(ranks, global_batch, min_share, max_share):
    assert check_bounds(ranks, global_batch, min_share, max_share) is None
    shares = equal_shares(ranks, global_batch, min_share, max_share)
    assert_valid(shares, ranks, global_batch, min_share, max_share)


def test_empty_cost_model_raises():
    with pytest.raises(ValueError, match="ranks must be at least 1"):
        minmax_shares([], [], 4)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("intercepts", "slopes"),
    [
        ([NAN, 0.0], [1.0, 1.0]),
        ([0.0, INF], [1.0, 1.0]),
        ([0.0, -INF], [1.0, 1.0]),
        ([0.0, 0.0], [NAN, 1.0]),
        ([0.0, 0.0], [1.0, INF]),
        ([0.0, 0.0], [1.0, 0.0]),
        ([0.0, 0.0], [1.0, -2.0]),
        ([0.0, 0.0], [-0.0, 1.0]),
    ],
)
def test_bad_costs_raise(intercepts, slopes):
    with pytest.raises(ValueError, match="cost model"):
        minmax_shares(intercepts, slopes, 10)


@pytest.mark.parametrize("weights", [[1.0, 0.0], [1.0, -1.0], [NAN, 1.0], [INF, 1.0], [-INF, 1.0]])
def test_bad_weights_raise(weights):
    with pytest.raises(ValueError, match="weights must be positive and finite"):
        proportional_shares(weights, 10)


@pytest.mark.parametrize(
    ("intercepts", "slopes"), [([0.0], [1.0, 1.0, 1.0]), ([0.0, 0.0, 0.0], [1.0])]
)
def test_mismatched_cost_lengths_raise_value_error(intercepts, slopes):
    with pytest.raises(ValueError):
        minmax_shares(intercepts, slopes, 6)


# Per-rank bounds: `min_share` and `max_share` as one entry per rank (a node with less memory
# takes a lower cap; None leaves a rank uncapped).


@st.composite
def per_rank_problems(draw, max_ranks=16, max_batch=100_000, max_min=50):
    """(intercepts, slopes, global_batch, min_share, max_share) with feasible bounds, at least one
    of them a list of one entry per rank (max entries None or at least the rank's minimum)."""
    ranks = draw(st.integers(1, max_ranks))
    lows = draw(st.lists(st.integers(0, max_min), min_size=ranks, max_size=ranks))
    extra = st.integers(0, max(2 * max_batch // ranks, 1))
    highs = [None if draw(st.booleans()) else max(v, 1) + draw(extra) for v in lows]
    form = draw(st.sampled_from(["both", "min", "max"]))
    if form == "max":
        lows = [min(lows)] * ranks
    if form == "min":
        highs = [highs[0] if highs[0] is None else max(highs[0], max(lows))] * ranks
    most = max_batch if None in highs else min(sum(highs), max_batch)
    assume(max(sum(lows), 1) <= most)
    global_batch = draw(st.integers(max(sum(lows), 1), most))
    intercepts = draw(st.lists(magnitudes, min_size=ranks, max_size=ranks))
    slopes = draw(st.lists(magnitudes, min_size=ranks, max_size=ranks))
    min_share = lows[0] if form == "max" else lows
    max_share = highs[0] if form == "min" else highs
    return intercepts, slopes, global_batch, min_share, max_share


def assert_within(shares, global_batch, lo, hi):
    """Integer shares summing to `global_batch`, each within its own rank's `[lo, hi]`."""
    assert shares.dtype == np.int64
    assert shares.shape == lo.shape == hi.shape
    assert int(shares.sum()) == global_batch
    assert np.all(shares >= lo) and np.all(shares <= hi)


@FAST
@given(per_rank_problems())
def test_per_rank_bounds_minmax_shares_are_valid_and_optimal(problem):
    a, c, global_batch, min_share, max_share = problem
    lo, hi = share_bounds(len(a), global_batch, min_share, max_share)
    shares = minmax_shares(a, c, global_batch, min_share, max_share)
    assert_within(shares, global_batch, lo, hi)
    current = float(costs(a, c, shares).max())
    assert current <= best_single_move(a, c, shares, lo, hi)
    caps = capacity_below(a, c, current, lo, hi)
    assert caps is None or sum(caps) < global_batch
    for split in (
        proportional_shares(c, global_batch, min_share, max_share),
        equal_shares(len(a), global_batch, min_share, max_share),
    ):
        assert_within(split, global_batch, lo, hi)


@settings(max_examples=300, deadline=None)
@given(per_rank_problems(max_ranks=3, max_batch=12, max_min=4))
def test_per_rank_bounds_match_brute_force_on_tiny_cases(problem):
    a, c, global_batch, min_share, max_share = problem
    lo, hi = share_bounds(len(a), global_batch, min_share, max_share)
    shares = minmax_shares(a, c, global_batch, min_share, max_share)
    assert_within(shares, global_batch, lo, hi)
    assert float(costs(a, c, shares).max()) == brute_force_optimum(a, c, global_batch, lo, hi)


@FAST
@given(problems())
def test_one_bound_repeated_per_rank_is_the_scalar_bound(problem):
    a, c, global_batch, min_share, max_share = problem
    ranks = len(a)
    for lows, highs in [
        ([min_share] * ranks, max_share),
        (min_share, [max_share] * ranks),
        (np.full(ranks, min_share), [max_share] * ranks),
    ]:
        assert (
            minmax_shares(a, c, global_batch, lows, highs).tolist()
            == minmax_shares(a, c, global_batch, min_share, max_share).tolist()
        )
        assert (
            equal_shares(ranks, global_batch, lows, highs).tolist()
            == equal_shares(ranks, global_batch, min_share, max_share).tolist()
        )


def test_per_rank_bounds_examples():
    # A node with less memory: rank 1 capped at 128 of 512, rank 0 takes the rest.
    assert equal_shares(2, 512, 1, [None, 128]).tolist() == [384, 128]
    # The fast rank 1 would take 75 of 100; its cap moves the rest to the slow rank 0.
    assert proportional_shares([1, 3], 100, max_share=[None, 60]).tolist() == [40, 60]
    # Rank 1 must take 30 although proportionally it would get 25.
    assert proportional_shares([3, 1], 100, min_share=[1, 30]).tolist() == [70, 30]
    # Ties still go to the lower rank among the ranks that the bounds leave free.
    assert equal_shares(3, 10, [0, 0, 5], [None, None, 5]).tolist() == [3, 2, 5]
    assert minmax_shares([0.0, 0.0], [1.0, 1.0], 9, [2, 2], [None, 3]).tolist() == [6, 3]
    assert share_bounds(2, 9, [2, 2], [None, 3])[1].tolist() == [9, 3]
    # One uncapped rank takes any batch: no sum of caps to exceed.
    assert check_bounds(2, 10**6, 1, [None, 5]) is None


@pytest.mark.parametrize(
    ("ranks", "global_batch", "min_share", "max_share", "message"),
    [
        (
            2,
            512,
            [256, 300],
            None,
            "global batch 512 is smaller than the sum of min_share [256, 300] = 556",
        ),
        (2, 600, 1, [200, 128], "global batch 600 exceeds the sum of max_share [200, 128] = 328"),
        (2, 10, [1, 2, 3], None, "min_share has 3 entries for 2 ranks"),
        (3, 10, 1, [None, 5], "max_share has 2 entries for 3 ranks"),
        (2, 10, [1, -1], None, "min_share of rank 1 must be non-negative, got -1"),
        (2, 10, [5, 1], [4, None], "max_share 4 is below min_share 5 for rank 0"),
        (2, 10, 2, [None, 1], "max_share 1 is below min_share 2 for rank 1"),
        (2, 10, [1, 3], 2, "max_share 2 is below min_share 3 for rank 1"),
        (2, 10, 1, [None, 2.5], "max_share of rank 1 must be an integer or None, got 2.5"),
        (2, 10, [1, None], None, "min_share of rank 1 must be an integer, got None"),
        (2, 10, [True, 1], None, "min_share of rank 0 must be an integer, got True"),
    ],
)
def test_infeasible_per_rank_bounds_name_the_rank_and_values(
    ranks, global_batch, min_share, max_share, message
):
    for call in (
        lambda: check_bounds(ranks, global_batch, min_share, max_share),
        lambda: equal_shares(ranks, global_batch, min_share, max_share),
        lambda: minmax_shares([0.0] * ranks, [1.0] * ranks, global_batch, min_share, max_share),
        lambda: proportional_shares([1.0] * ranks, global_batch, min_share, max_share),
    ):
        with pytest.raises(ValueError) as caught:
            call()
        assert str(caught.value) == message


@pytest.mark.parametrize(
    ("ranks", "batch", "low", "high", "expected"),
    [
        (2, 512, 1, None, 8),  # the floor
        (2, 512, 16, None, 16),  # a higher min_share stays
        (4, 20, 1, None, 5),  # 8 each would not fit: an equal split at worst
        (2, 512, [1, 12], None, [8, 12]),  # per rank
        (2, 512, 1, [None, 6], [8, 6]),  # a cap below the floor wins
    ],
)
def test_batchnorm_floor_raises_min_share_as_far_as_the_bounds_allow(
    ranks, batch, low, high, expected
):
    floor = batchnorm_floor(ranks, batch, low, high)
    assert floor == expected
    check_bounds(ranks, batch, floor, high)
