"""Warm starts in the core: `Policy.warm` and the costs it starts from (`core.warm`): a
cluster's tangents at its exact split, a probe's line through two timed shares."""

import numpy as np
import pytest
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.costs import AffineCost, TableCost
from dynalloc.core.policies import make_policy
from dynalloc.core.shares import minmax_shares, share_bounds
from dynalloc.core.simulate import Optimum, project, simulate
from dynalloc.core.warm import (
    PROBE_REPEATS,
    PROBE_SHORT_S,
    cluster_costs,
    fastest_pass,
    first_probe,
    probe_costs,
    second_probe,
    tangents,
)

A, C = np.array([0.015, 0.015, 0.016, 0.05]), np.array([0.001, 0.001, 0.0011, 0.0085])


def test_a_warm_adaptive_starts_at_the_split_its_costs_balance_and_holds_it():
    policy = make_policy("adaptive", 4, 512)
    policy.warm(A, C)
    expected = minmax_shares(A, C, 512)
    assert policy.shares.tolist() == expected.tolist()
    trace = simulate(policy, A, C, 20)  # noise-free: nothing to move for
    assert (trace.shares == expected).all()


def test_a_cold_start_pays_the_equal_split_first():
    cold, warm = make_policy("adaptive", 4, 512), make_policy("adaptive", 4, 512)
    warm.warm(A, C)
    first_cold = simulate(cold, A, C, 1).true_times.max()
    first_warm = simulate(warm, A, C, 1).true_times.max()
    assert first_cold > 3 * first_warm


def test_warm_costs_that_are_wrong_are_corrected_by_the_measurements():
    policy = make_policy("adaptive", 2, 256)
    policy.warm([0.01, 0.01], [0.001, 0.001])  # believed equal; rank 1 is 3x slower
    trace = simulate(policy, [0.01, 0.03], [0.001, 0.003], 30, noise=0.02, seed=1)
    best = minmax_shares([0.01, 0.03], [0.001, 0.003], 256)
    assert np.abs(trace.shares[-1] - best).max() <= 0.05 * 256


@pytest.mark.parametrize("name", ["static", "proportional", "dbs", "controller"])
def test_a_policy_without_cost_models_cannot_start_warm(name):
    with pytest.raises(ValueError, match=f"policy '{name}' models no costs"):
        make_policy(name, 2, 64).warm([0.0, 0.0], [1.0, 1.0])


@pytest.mark.parametrize(
    ("a", "c"), [([0.0], [1.0]), ([-1.0, 0.0], [1.0, 1.0]), ([0.0, 0.0], [0.0, 1.0])]
)
def test_bad_warm_costs_are_refused(a, c):
    with pytest.raises(ValueError, match="warm start needs"):
        make_policy("adaptive", 2, 64).warm(a, c)


def test_tangents_of_a_line_are_the_line_and_of_a_table_its_local_slope():
    a, c = tangents([AffineCost(0.5, 0.01)], [40])
    assert a[0] == pytest.approx(0.5) and c[0] == pytest.approx(0.01)
    table = TableCost([2, 16, 64, 256], [0.014, 0.025, 0.072, 0.265])
    a, c = tangents([table], [150])
    slope = (0.265 - 0.072) / (256 - 64)
    assert c[0] == pytest.approx(slope) and a[0] + c[0] * 150 == pytest.approx(table([150])[0])


def test_a_clusters_costs_start_at_its_exact_split():
    spec = {
        "global_batch": 512, "iterations": 10, "network": {"exchange_s": 0.0},
        "groups": [
            {"name": "fast", "count": 3, "cost": {"table": [[2, 0.0146], [64, 0.0727],
                                                             [256, 0.2655]]}},
            {"name": "slow", "count": 1, "slowdown": 2.0,
             "cost": {"table": [[2, 0.0517], [64, 0.5667], [256, 2.2238]]}},
        ],
    }  # fmt: skip
    cluster = parse_cluster(spec)
    policy = make_policy("adaptive", 4, 512)
    policy.warm(*cluster_costs(cluster))
    optimum = Optimum(cluster)
    assert np.abs(policy.shares - optimum.shares).max() <= 2
    warm, best = project(cluster, policy), project(cluster, Optimum(cluster))
    assert warm.times[0] <= 1.01 * best.times[0]


def test_a_probe_gives_the_line_through_its_two_points():
    a, c = probe_costs(16, [64, 8], [0.02, 0.2], [0.05, 0.1])
    assert c.tolist() == pytest.approx([0.03 / 48, 0.1 / 8])
    assert a.tolist() == pytest.approx([0.02 - 16 * 0.03 / 48, 0.2 - 16 * 0.1 / 8])
    with pytest.raises(ValueError, match="two different shares"):
        probe_costs(16, [16], [0.1], [0.2])


@pytest.mark.parametrize(
    ("passes", "timed", "seconds"),
    [
        ([0.004, 0.012, 0.003, 0.004, 0.005, 0.001], 5, 0.003),  # short: five, the fastest
        ([0.030, 0.020, 0.010], 2, 0.020),  # until they add up to PROBE_SHORT_S
        ([0.200, 0.001], 1, 0.200),  # a long pass is timed once
    ],
)
def test_a_short_probe_pass_is_timed_again_and_the_fastest_kept(passes, timed, seconds):
    assert (PROBE_SHORT_S, PROBE_REPEATS) == (0.05, 5)
    calls = iter(passes)
    taken = []
    assert fastest_pass(lambda: taken.append(next(calls)) or taken[-1]) == seconds
    assert len(taken) == timed


def test_the_second_probe_is_where_the_first_puts_each_ranks_share():
    assert first_probe(512, 4) == 16 and first_probe(8, 4) == 1
    second = second_probe(16, [0.025, 0.025, 0.031, 0.164], 512, share_bounds(4, 512))
    assert second.sum() == 512 and second[3] < 0.1 * 512 < second[0]
    assert second_probe(4, [1.0, 1.0], 8, share_bounds(2, 8)).tolist() == [5, 5]  # never 4
