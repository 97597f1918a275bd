"""The bounds of `dynalloc.core.shares`' splits: `min_share` and `max_share` refused by name when
no split fits them, one bound per rank (valid and optimal splits, the same as one scalar bound),
and `batchnorm_floor`."""

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
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from share_problems import (
    FAST,
    assert_valid,
    best_single_move,
    brute_force_optimum,
    capacity_below,
    costs,
    magnitudes,
    problems,
)


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
