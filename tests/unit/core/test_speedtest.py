"""The F-test that keeps adaptive on its start split: exact tail probabilities, its false alarm
rate under equal speeds, and its power against a real difference."""

import numpy as np
import pytest
from dynalloc.core.speedtest import SURVIVAL_AT_ONE, EqualSpeedTest, f_survival
from scipy import stats


@pytest.mark.parametrize("d1", [1, 2, 3, 7])
@pytest.mark.parametrize("d2", [2, 3, 5, 10, 50, 400])
def test_f_survival_is_scipys(d1, d2):
    for statistic in (0.0, 0.01, 0.5, 1.0, 3.0, 10.0, 50.0, 500.0):
        expected = stats.f.sf(statistic, d1, d2)
        assert f_survival(statistic, d1, d2) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def p_values(ranks, iterations, slowdowns, noise, runs, seed=0):
    """The test's p-value after `iterations` observations of each of `runs` simulated runs."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(runs):
        test = EqualSpeedTest(ranks)
        for _ in range(iterations):
            common = rng.uniform(0.5, 2.0)  # a slowdown every rank shares: a block effect
            test.observe(common * np.asarray(slowdowns) * rng.lognormal(0.0, noise, ranks))
        values.append(test.p_value())
    return np.array(values)


@pytest.mark.parametrize(("ranks", "iterations"), [(2, 20), (4, 10), (4, 60)])
def test_equal_speeds_are_rejected_about_as_often_as_the_level_says(ranks, iterations):
    """Far from the prior (noise 13%, 60 iterations) the level is exact; with few
    iterations the prior's 5% makes it a little bolder, never wildly so."""
    values = p_values(ranks, iterations, [1.0] * ranks, noise=0.13, runs=2000)
    for level in (0.05, 0.2):
        assert 0.5 * level <= np.mean(values < level) <= 1.6 * level


def test_a_real_difference_is_found_and_a_first_iteration_proves_nothing():
    assert np.mean(p_values(2, 6, [1.0, 1.3], noise=0.05, runs=200) < 1e-3) >= 0.95
    assert np.all(p_values(4, 1, [1.0, 1.0, 1.0, 1.3], noise=0.05, runs=200) > 1e-3)


def test_no_observation_and_one_rank_prove_nothing():
    assert EqualSpeedTest(3).p_value() == 1.0
    one = EqualSpeedTest(1)
    one.observe([0.1])
    assert one.p_value() == 1.0


def test_f_exceeds_1_at_least_as_often_as_differs_assumes():
    """`differs` skips the tail where the statistic is at most 1: sound only while P(F > 1)
    stays above SURVIVAL_AT_ONE at every degrees of freedom a run can have."""
    for d1 in [*range(1, 40), 63, 511, 4095]:
        for d2 in [*range(1, 120), 500, 10**4, 10**6, 10**9]:
            assert f_survival(1.0, d1, d2) >= SURVIVAL_AT_ONE, (d1, d2)


@pytest.mark.parametrize("slowdowns", [[1.0, 1.0, 1.0], [1.0, 1.0, 1.15]])
def test_differs_decides_as_the_p_value_does(slowdowns):
    rng = np.random.default_rng(3)
    decisions = []
    for _ in range(100):
        test = EqualSpeedTest(3)
        for _ in range(int(rng.integers(1, 12))):
            test.observe(np.asarray(slowdowns) * rng.lognormal(0.0, 0.1, 3))
        for significance in (1e-3, 0.05, 0.3, 0.5, 1.0):
            decisions.append(test.differs(significance))
            assert decisions[-1] == (test.p_value() < significance), (significance, test.p_value())
    assert 0 < sum(decisions) < len(decisions)  # both answers came up
