"""`dynalloc.core.monotone` and `dynalloc.core.costs`: the exact min-max split of nondecreasing
costs (against minmax_shares on affine costs, against brute force on tables), and the costs
themselves (interpolation, extension beyond the table, refused tables)."""

import itertools

import numpy as np
import pytest
from dynalloc.core.costs import AffineCost, TableCost
from dynalloc.core.monotone import minmax_monotone
from dynalloc.core.shares import minmax_shares
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def slowest(costs, counts, shares):
    owner = np.repeat(np.arange(len(costs)), counts)
    return max(float(costs[k](shares[owner == k]).max()) for k in range(len(costs)) if counts[k])


@FAST
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0.001, 1)), min_size=1, max_size=6),
    st.integers(0, 400),
)
def test_on_affine_costs_it_reaches_the_optimum_minmax_shares_finds(coefficients, extra):
    ranks = len(coefficients)
    batch = ranks + extra
    a, c = (np.array(v) for v in zip(*coefficients, strict=True))
    shares = minmax_monotone(
        [AffineCost(x, y) for x, y in coefficients],
        [1] * ranks,
        batch,
        [1] * ranks,
        [batch] * ranks,
    )
    assert shares.sum() == batch and shares.min() >= 1
    assert np.max(a + c * shares) == pytest.approx(np.max(a + c * minmax_shares(a, c, batch)))


TABLES = [
    TableCost([1, 4, 8], [0.5, 0.6, 2.0]),
    TableCost([2, 3], [0.1, 0.1]),  # flat: many shares cost the same
    TableCost([1, 10], [0.0, 3.0]),
]


@pytest.mark.parametrize("batch", [3, 7, 12, 16])
def test_on_tables_it_matches_brute_force_within_the_bounds(batch):
    lows, highs = [1, 1, 1], [10, 6, 10]
    shares = minmax_monotone(TABLES, [1, 1, 1], batch, lows, highs)
    best = min(
        slowest(TABLES, [1, 1, 1], np.array(split))
        for split in itertools.product(
            *(range(lo, hi + 1) for lo, hi in zip(lows, highs, strict=True))
        )
        if sum(split) == batch
    )
    assert shares.sum() == batch
    assert all(lo <= s <= hi for s, lo, hi in zip(shares, lows, highs, strict=True))
    assert slowest(TABLES, [1, 1, 1], shares) == pytest.approx(best)


def test_identical_ranks_of_a_kind_are_split_evenly_lowest_rank_first():
    fast, slow = AffineCost(0.0, 1.0), AffineCost(0.0, 2.0)
    shares = minmax_monotone([fast, slow], [2, 2], 13, [1, 1], [13, 13])
    assert shares.tolist() == [5, 4, 2, 2]  # the slowest rank: 2 x 2 = 4 = 1 x 4 < 5: optimal
    assert slowest([fast, slow], [2, 2], shares) == 5.0


def test_infeasible_bounds_and_decreasing_costs_are_refused():
    with pytest.raises(ValueError, match="no split of 50 within the bounds: they allow 2 to 20"):
        minmax_monotone([AffineCost(0, 1)], [2], 50, [1], [10])
    with pytest.raises(ValueError, match="decreases"):
        minmax_monotone([lambda b: -1.0 * b], [2], 4, [1], [4])


def test_a_table_is_linear_between_its_points_and_along_its_end_segments_beyond():
    table = TableCost([8, 16, 32], [0.1, 0.2, 0.3])
    assert table(np.array([8, 12, 16, 24, 32])) == pytest.approx([0.1, 0.15, 0.2, 0.25, 0.3])
    assert table(np.array([64])) == pytest.approx([0.5])  # the last slope goes on
    assert table(np.array([4, 0])) == pytest.approx([0.05, 0.0])  # the first one, floored at 0


@pytest.mark.parametrize(
    "batches, seconds, message",
    [
        ([8], [0.1], "at least two"),
        ([8, 8], [0.1, 0.2], "batches must increase"),
        ([8, 16], [0.2, 0.1], "must not decrease"),
    ],
)
def test_a_table_that_cannot_be_monotone_is_refused(batches, seconds, message):
    with pytest.raises(ValueError, match=message):
        TableCost(batches, seconds)
