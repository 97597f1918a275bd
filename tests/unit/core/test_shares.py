"""`dynalloc.core.shares`' splits of a global batch: equal, proportional and exact integer
min-max, valid and optimal (brute force on tiny cases), ties to the lower rank; the cost models and
weights they refuse."""

import numpy as np
import pytest
from dynalloc.core.shares import equal_shares, minmax_shares, proportional_shares
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
