"""`dynalloc.core.simulate.project`: policies and the optimum driven through a modelled cluster
(what an iteration costs, the shared noise draws, new shapes, epochs, the wait fraction as
rundir defines it, and a ceiling no policy beats without noise)."""

import numpy as np
import pytest
from dynalloc import rundir
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.policies import REPLAYABLE, make_policy
from dynalloc.core.simulate import Optimum, project


def cluster(**overrides):
    spec = {
        "global_batch": 120,
        "iterations": 40,
        "overhead_s": 0.003,
        "network": {"exchange_s": 0.002},
        "groups": [
            {"name": "fast", "count": 3, "cost": {"intercept_s": 0.01, "per_sample_s": 0.001}},
            {"name": "slow", "count": 1, "cost": {"table": [[10, 0.05], [40, 0.14]]}},
        ],
    }
    spec.update(overrides)
    return parse_cluster(spec)


def policy(name, modelled):
    if name == "optimum":
        return Optimum(modelled)
    low, high = modelled.share_bounds()
    return make_policy(name, modelled.ranks, modelled.global_batch, low, high)


def test_static_on_identical_ranks_without_noise_never_waits():
    same = {"name": "node", "count": 4, "cost": {"intercept_s": 0.01, "per_sample_s": 0.001}}
    projected = project(cluster(groups=[same]), policy("static", cluster(groups=[same])))
    assert projected.wait_fraction == pytest.approx(0.0, abs=1e-12)
    assert projected.times == pytest.approx([0.01 + 0.03 + 0.002 + 0.003] * 40)
    assert projected.samples_per_s() == pytest.approx(120 / 0.045)


@pytest.mark.parametrize("name", REPLAYABLE)
def test_no_policy_beats_the_optimum_without_noise(name):
    modelled = cluster(changes=[{"group": "slow", "factor": 2, "start": 15, "end": 30}])
    optimum = project(modelled, policy("optimum", modelled))
    projected = project(modelled, policy(name, modelled))
    assert np.all(projected.times >= optimum.times - 1e-12)
    assert optimum.split_changes == 2  # at the change's start and end, not in between


def test_every_policy_meets_the_same_noise_draws():
    """static and the optimum of identical ranks hold the same split: same draws, same times."""
    same = {"name": "node", "count": 8, "cost": {"intercept_s": 0.01, "per_sample_s": 0.001}}
    noisy = cluster(groups=[{**same, "noise": 0.1, "jitter": 0.2}])
    static, optimum = (project(noisy, policy(n, noisy)) for n in ("static", "optimum"))
    assert np.array_equal(static.times, optimum.times)
    assert static.times.std() > 0  # the noise is there
    again = project(noisy, policy("static", noisy))
    assert np.array_equal(again.times, static.times)  # and drawn from the seed alone


def test_the_noise_has_the_relative_spread_asked_for():
    same = {"name": "node", "count": 1, "cost": {"intercept_s": 0.0, "per_sample_s": 0.001}}
    one = cluster(groups=[{**same, "noise": 0.05}], iterations=4000, overhead_s=0.0,
                  network={"exchange_s": 0.0})  # fmt: skip
    times = project(one, policy("static", one)).times / 0.12
    assert times.mean() == pytest.approx(1.0, abs=0.005)
    assert times.std() == pytest.approx(0.05, rel=0.05)


def test_a_new_share_costs_new_shape_once_and_epochs_end_in_a_smaller_batch():
    same = {"name": "node", "count": 2, "cost": {"intercept_s": 0.0, "per_sample_s": 0.001}}
    modelled = cluster(groups=[same], new_shape=0.5, dataset_size=300, iterations=6,
                       overhead_s=0.0, network={"exchange_s": 0.0})  # fmt: skip
    projected = project(modelled, policy("static", modelled))
    assert projected.samples.tolist() == [120, 120, 60, 120, 120, 60]
    assert projected.times == pytest.approx([0.09, 0.06, 0.045, 0.06, 0.06, 0.03])


def test_dbs_moves_only_at_epoch_boundaries():
    modelled = cluster(dataset_size=600, iterations=15)
    projected = project(modelled, policy("dbs", modelled))
    assert projected.split_changes == 2  # after epochs 0 and 1 (5 batches each)


def test_the_wait_fraction_is_rundirs():
    modelled = cluster(iterations=3)
    projected = project(modelled, policy("static", modelled))
    seconds = modelled.seconds(np.array([30, 30, 30, 30]))  # static, noise-free
    rows = [
        rundir.Row(i, 0, r, 30, seconds[r], 0, seconds.max() - seconds[r], 0, 0, 1, "static")
        for i in range(3)
        for r in range(4)
    ]
    assert projected.wait_fraction == pytest.approx(np.mean(rundir.wait_fractions(rows, 4)))


def test_adaptive_comes_within_a_percent_of_the_optimum_of_a_noisy_cluster():
    fast, slow = ({**group, "noise": 0.05} for group in cluster().spec()["groups"])
    noisy = cluster(
        iterations=200, global_batch=240, groups=[{**fast, "count": 6}, {**slow, "count": 2}]
    )
    adaptive, optimum = (project(noisy, policy(n, noisy)) for n in ("adaptive", "optimum"))
    assert adaptive.steady_s() < 1.01 * optimum.steady_s()
    assert project(noisy, policy("static", noisy)).steady_s() > 1.3 * optimum.steady_s()
