"""`dynalloc.core.shares.cheapest_units` hands out the last units of `minmax_shares` in a few
array passes; its specification is the greedy one unit at a time, through a heap, that it
replaced."""

import heapq

import numpy as np
from dynalloc.core.shares import ONE_AT_A_TIME, cheapest_units
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from share_problems import magnitudes  # costs over the whole range a policy produces


def one_at_a_time(a, c, shares, high, units):
    """Each unit to the rank whose next one costs least, ties to the lower rank."""
    taken = [0] * len(shares)
    heap = [(a[r] + c[r] * (shares[r] + 1), r) for r in range(len(shares)) if shares[r] < high[r]]
    heapq.heapify(heap)
    for _ in range(units):
        _, r = heapq.heappop(heap)
        taken[r] += 1
        if shares[r] + taken[r] < high[r]:
            heapq.heappush(heap, (a[r] + c[r] * (shares[r] + taken[r] + 1), r))
    return taken


@st.composite
def last_units(draw):
    """(a, c, shares, high, units): ranks beyond and below ONE_AT_A_TIME units, costs of any
    magnitude, and costs flat to the last bits (a huge intercept, a tiny slope), where the
    floor's estimate of each rank's count fails and the list must widen."""
    ranks = draw(st.integers(1, 300))
    flat = draw(st.booleans())
    if flat:
        a = np.full(ranks, 1e6) + np.array(
            draw(st.lists(st.sampled_from([0.0, 1e-10, 3e-10]), min_size=ranks, max_size=ranks))
        )
        c = np.array(
            draw(st.lists(st.sampled_from([1e-17, 3e-17, 1e-12]), min_size=ranks, max_size=ranks))
        )
    else:
        a = np.array(draw(st.lists(magnitudes, min_size=ranks, max_size=ranks)))
        c = np.array(draw(st.lists(magnitudes, min_size=ranks, max_size=ranks)))
    shares = np.array(draw(st.lists(st.integers(0, 1000), min_size=ranks, max_size=ranks)))
    room = np.array(draw(st.lists(st.integers(0, 60), min_size=ranks, max_size=ranks)))
    units = draw(st.integers(0, int(room.sum())))
    return a, c, shares, shares + room, units


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(last_units())
def test_cheapest_units_are_the_greedys_one_at_a_time(problem):
    a, c, shares, high, units = problem
    taken = cheapest_units(a, c, shares, high, units)
    assert taken.tolist() == one_at_a_time(a, c, shares, high, units)


def test_both_ways_of_handing_out_are_exercised():
    """Few units go one at a time, many through the list, and ties go to the lower rank."""
    ranks = 50
    a, c, shares = np.zeros(ranks), np.ones(ranks), np.zeros(ranks, dtype=np.int64)
    high = np.full(ranks, 10)
    for units in (ONE_AT_A_TIME, ONE_AT_A_TIME + 1, ranks + 7):
        taken = cheapest_units(a, c, shares, high, units)
        assert taken.tolist() == one_at_a_time(a, c, shares, high, units)
        assert taken[: units % ranks or ranks].min() == taken.max()


def test_costs_flat_to_the_last_bits_widen_the_list_until_it_is_complete():
    """1e6 + 1e-17 b is 1e6 for every b: each rank's floor estimate says it has no unit under
    the level, so the list widens; all costs tie and the lowest ranks fill up first."""
    ranks = 40
    a, c = np.full(ranks, 1e6), np.full(ranks, 1e-17)
    shares, high = np.full(ranks, 500), np.full(ranks, 503)
    taken = cheapest_units(a, c, shares, high, 100)
    assert taken.tolist() == [3] * 33 + [1] + [0] * 6
    assert taken.tolist() == one_at_a_time(a, c, shares, high, 100)
