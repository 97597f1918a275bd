"""Allocation policies: the contract they all keep (hypothesis: any measurement, scalar and
per-rank bounds, unusable times), the simple policies' own rules, and a capped fast rank."""

import warnings

import numpy as np
import pytest
from dynalloc.core.policies import POLICIES, make_policy
from dynalloc.core.simulate import simulate
from hypothesis import assume, given, settings
from hypothesis import strategies as st

TIMES = st.one_of(
    st.floats(min_value=1e-6, max_value=1e4),
    st.sampled_from([0.0, -1.0, float("nan"), float("inf"), -float("inf")]),
)


def build(name, ranks, batch, min_share=1, max_share=None):
    params = {"speeds": list(np.linspace(1.0, 2.0, ranks))} if name == "oracle" else {}
    return make_policy({"name": name, **params}, ranks, batch, min_share, max_share)


@st.composite
def runs(draw):
    ranks = draw(st.integers(1, 8))
    min_share = draw(st.integers(0, 4))
    batch = draw(st.integers(max(ranks * min_share, 1), 4096))
    max_share = draw(st.one_of(st.none(), st.integers(-(-batch // ranks), batch)))
    max_share = None if max_share is not None and max_share < min_share else max_share
    steps = draw(st.lists(st.lists(TIMES, min_size=ranks, max_size=ranks), max_size=12))
    return ranks, batch, min_share, max_share, steps


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=60, deadline=None)
@given(run=runs())
def test_shares_sum_to_batch_within_bounds_for_any_measurement(name, run):
    ranks, batch, min_share, max_share, steps = run
    policy = build(name, ranks, batch, min_share, max_share)
    shares = policy.shares
    for iteration, times in enumerate(steps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            shares = policy.update(shares, times, iteration + 1, iteration // 4)
        assert shares.dtype == np.int64
        assert shares.sum() == batch
        assert shares.min() >= min_share
        if max_share is not None:
            assert shares.max() <= max_share


@st.composite
def per_rank_bounds(draw, max_ranks=8):
    """(ranks, batch, min_share, max_share): one bound per rank (a None cap leaves a rank free),
    a global batch the bounds allow."""
    ranks = draw(st.integers(1, max_ranks))
    lows = draw(st.lists(st.integers(0, 40), min_size=ranks, max_size=ranks))
    highs = [
        None if draw(st.booleans()) else max(low, 1) + draw(st.integers(0, 600)) for low in lows
    ]
    most = 4096 if None in highs else min(sum(highs), 4096)
    assume(max(sum(lows), 1) <= most)
    batch = draw(st.integers(max(sum(lows), 1), most))
    return ranks, batch, lows, highs


def assert_within(shares, batch, lows, highs):
    assert shares.dtype == np.int64
    assert shares.sum() == batch
    assert all(share >= low for share, low in zip(shares, lows, strict=True))
    assert all(high is None or share <= high for share, high in zip(shares, highs, strict=True))


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=60, deadline=None)
@given(bounds=per_rank_bounds(), data=st.data())
def test_per_rank_bounds_hold_for_any_measurement(name, bounds, data):
    ranks, batch, lows, highs = bounds
    policy = build(name, ranks, batch, lows, highs)
    shares = policy.shares
    assert_within(shares, batch, lows, highs)
    steps = data.draw(st.lists(st.lists(TIMES, min_size=ranks, max_size=ranks), max_size=12))
    for iteration, times in enumerate(steps):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            shares = policy.update(shares, times, iteration + 1, iteration // 4)
        assert_within(shares, batch, lows, highs)


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=40, deadline=None)
@given(
    bounds=per_rank_bounds(max_ranks=6),
    slopes=st.lists(st.floats(1e-4, 1e-2), min_size=6, max_size=6),
    change=st.lists(st.floats(1.0, 4.0), min_size=6, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_every_policy_keeps_per_rank_bounds_on_simulated_ranks(name, bounds, slopes, change, seed):
    """Affine ranks of any speeds, under noise, whose speeds change at iteration 10: the policies
    chase the balance, and every split stays inside each rank's own bounds."""
    ranks, batch, lows, highs = bounds
    policy = build(name, ranks, batch, lows, highs)

    def speed(i):
        return change[:ranks] if i >= 10 else [1.0] * ranks

    trace = simulate(policy, [0.01] * ranks, slopes[:ranks], 30, noise=0.1, seed=seed, speed=speed)
    for shares in trace.shares:
        assert_within(shares, batch, lows, highs)


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("bad", [0.0, -0.5, float("nan"), float("inf")])
def test_unusable_time_keeps_shares_and_warns_once(name, bad):
    policy = build(name, 2, 100)
    shares = policy.update(policy.shares, [1.0, 3.0], 1, 1)
    with pytest.warns(RuntimeWarning, match="keeping the previous shares"):
        again = policy.update(shares, [1.0, bad], 2, 2)
    assert again.tolist() == shares.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise here
        policy.update(again, [bad, 1.0], 3, 3)


def test_unknown_policy_and_parameter_are_named():
    with pytest.raises(ValueError, match="unknown policy 'fastest'.*adaptive"):
        make_policy("fastest", 2, 64)
    with pytest.raises(ValueError, match="adaptive has no parameter 'gain'"):
        make_policy({"name": "adaptive", "gain": 0.3}, 2, 64)


def test_static_is_an_equal_split():
    policy = make_policy("static", 3, 100)
    assert policy.update(policy.shares, [1.0, 5.0, 9.0], 1, 0).tolist() == [34, 33, 33]


def test_proportional_follows_last_throughput():
    policy = make_policy("proportional", 2, 400)
    assert policy.update([200, 200], [1.0, 3.0], 1, 0).tolist() == [300, 100]


def test_dbs_changes_shares_only_at_epoch_boundaries():
    policy = make_policy("dbs", 2, 400)
    assert policy.update([200, 200], [1.0, 3.0], 1, 0).tolist() == [200, 200]
    assert policy.update([200, 200], [1.0, 3.0], 2, 1).tolist() == [300, 100]


def test_controller_is_idle_inside_its_dead_band_and_moves_outside():
    policy = make_policy({"name": "controller", "dead_band": 0.05}, 2, 400)
    assert policy.update([200, 200], [1.0, 1.04], 1, 0).tolist() == [200, 200]
    moved = policy.update([200, 200], [1.0, 2.0], 2, 0)
    assert moved[0] > 200 > moved[1]


def test_oracle_keeps_the_shares_of_its_speeds():
    policy = make_policy({"name": "oracle", "speeds": [3.0, 1.0]}, 2, 400)
    assert policy.shares.tolist() == [300, 100]
    assert policy.update([300, 100], [5.0, 1.0], 1, 0).tolist() == [300, 100]


AFFINE = ([0.05, 0.15], [1e-3, 3e-3])  # rank 1 three times slower, overhead 5-9% of the time


@pytest.mark.parametrize("name", ["proportional", "controller", "adaptive", "oracle"])
def test_a_capped_fast_rank_is_held_at_its_cap(name):
    """Rank 0 is three times faster and would take 793 of 1024; its node allows 650 (and rank 1
    must take at least 300): the balancing policies give it exactly its cap, never more."""
    params = {"speeds": [3.0, 1.0]} if name == "oracle" else {}
    policy = make_policy({"name": name, **params}, 2, 1024, [1, 300], [650, None])
    trace = simulate(policy, *AFFINE, 40, noise=0.05, seed=0)
    assert trace.shares[:, 0].max() <= 650
    assert trace.shares[:, 1].min() >= 300
    assert trace.shares[-10:].tolist() == [[650, 374]] * 10
