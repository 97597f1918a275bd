"""Replaying measured speeds: what each rank pays, and that a paired replay ranks policies."""

import numpy as np
import pytest
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import replay


def test_a_rank_takes_its_share_times_its_measured_seconds_per_sample():
    speeds = np.array([[0.01, 0.02], [0.01, 0.03], [0.02, 0.02]])
    trace = replay(make_policy("static", 2, 100), speeds)
    assert np.array_equal(trace.shares, [[50, 50]] * 3)
    assert np.allclose(trace.times, 50 * speeds)


def test_a_share_costs_the_new_shape_once_per_rank():
    """proportional follows the last speeds: equal, then 2:1, then equal and 2:1 again; only
    the first use of a share by a rank pays."""
    speeds = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 2.0], [1.0, 1.0], [1.0, 2.0], [1.0, 1.0]])
    trace = replay(make_policy("proportional", 2, 90), speeds, new_shape=0.5)
    shares = [[45, 45], [45, 45], [45, 45], [60, 30], [45, 45], [60, 30]]
    assert trace.shares.tolist() == shares
    charged = [[1.5, 1.5], [1, 1], [1, 1], [1.5, 1.5], [1, 1], [1, 1]]
    assert np.allclose(trace.times, np.array(shares) * speeds * charged)


@pytest.mark.parametrize("rival", ["static", "proportional", "controller"])
def test_on_the_same_noisy_speeds_adaptive_beats_each_rival_with_a_slow_rank(rival):
    rng = np.random.default_rng(3)
    speeds = np.array([1.0, 1.0, 1.0, 2.0]) * rng.uniform(0.9, 1.1, size=(120, 4))
    total = {
        name: replay(make_policy(name, 4, 512), speeds, new_shape=0.07).times.max(axis=1).sum()
        for name in ("adaptive", rival)
    }
    assert total["adaptive"] < total[rival]
