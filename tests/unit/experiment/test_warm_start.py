"""`policy.warm_start`: its forms checked (`experiment.warm_spec`) and resolved into per-rank
costs (`experiment.warm_start`) from a run directory, a cluster file or the costs themselves;
what does not match the run is refused in one line."""

import csv

import numpy as np
import pytest
import yaml
from dynalloc import rundir
from dynalloc.errors import DynallocError
from dynalloc.experiment.warm_spec import check_warm_start
from dynalloc.experiment.warm_start import warm_costs

A, C = np.array([0.02, 0.05]), np.array([0.001, 0.004])  # each rank's own cost


def recorded_run(root, ranks=2, model="lenet", slowdown=(1.0, 2.0), iterations=30):
    """A run directory whose rank r computed slowdown[r] * (A[r] + C[r] b) at moving shares."""
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with open(root / rundir.ITERATIONS, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(rundir.ROW_FIELDS)
        for i in range(iterations):
            share = 100 + int(rng.integers(-30, 30))
            for r in range(ranks):
                b = share if r == 0 else 200 - share
                busy = slowdown[r] * (A[r] + C[r] * b) * (1 + 0.01 * rng.standard_normal())
                writer.writerow([i, 0, r, b, busy, 0.001, 0.0, busy + 0.002, 1.0, slowdown[r],
                                 "adaptive", 0.0, 0.0, ranks])  # fmt: skip
    config = {"ranks": ranks, "model": model, "framework": "mxnet", "global_batch": 200,
              "scenario": {"slowdown": list(slowdown), "changes": []}}  # fmt: skip
    (root / rundir.CONFIG).write_text(yaml.safe_dump(config))
    return root


CONFIG = {"model": "lenet", "framework": "mxnet"}


def test_a_run_directory_gives_each_ranks_own_cost(tmp_path):
    run = recorded_run(tmp_path / "run")
    costs = warm_costs(str(run), 2, CONFIG)
    predicted = np.array(costs["intercept_s"]) + np.array(costs["per_sample_s"]) * 100
    assert predicted == pytest.approx(A + C * 100, rel=0.05)  # the slowdown divided out
    assert costs["source"] == str(run)
    scaled = warm_costs(str(run), 2, CONFIG, factors=[1.0, 3.0])
    assert scaled["per_sample_s"][1] == pytest.approx(3 * costs["per_sample_s"][1])


@pytest.mark.parametrize(
    ("ranks", "config", "message"),
    [
        (3, CONFIG, "ran on 2 ranks, this run has 3"),
        (2, {**CONFIG, "model": "mlp"}, "trained model 'lenet', this run 'mlp'"),
        (2, {**CONFIG, "framework": "torch"}, "trained framework 'mxnet', this run 'torch'"),
    ],
)
def test_a_run_directory_of_another_run_is_refused(tmp_path, ranks, config, message):
    run = recorded_run(tmp_path / "run")
    with pytest.raises(DynallocError, match=message):
        warm_costs(str(run), ranks, config)


def test_a_folder_that_is_no_run_directory_is_refused(tmp_path):
    with pytest.raises(DynallocError, match="is not a run directory"):
        warm_costs(str(tmp_path), 2, CONFIG)


def test_a_cluster_file_gives_the_tangents_at_its_split(tmp_path):
    spec = {"global_batch": 64, "iterations": 5, "network": {"exchange_s": 0.0},
            "groups": [{"name": "a", "count": 1, "cost": {"intercept_s": 0.01,
                                                           "per_sample_s": 0.001}},
                       {"name": "b", "count": 1, "noise": 0.1,
                        "cost": {"intercept_s": 0.02, "per_sample_s": 0.003}}]}  # fmt: skip
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    costs = warm_costs({"cluster": str(path)}, 2)
    assert costs["intercept_s"] == pytest.approx([0.01, 0.02])
    assert costs["per_sample_s"] == pytest.approx([0.001, 0.003])
    with pytest.raises(DynallocError, match="has 2 ranks, this run 3"):
        warm_costs({"cluster": str(path)}, 3)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("probe", "probe"),
        ("runs/previous", "runs/previous"),
        ({"cluster": "c.yaml"}, {"cluster": "c.yaml"}),
        ({"intercept_s": [0, 1], "per_sample_s": [1, 2]},
         {"intercept_s": [0.0, 1.0], "per_sample_s": [1.0, 2.0]}),
    ],
)  # fmt: skip
def test_the_forms_of_a_warm_start(value, expected):
    assert check_warm_start(value, "adaptive", 2) == expected


@pytest.mark.parametrize(
    ("value", "policy", "message"),
    [
        ("probe", "static", "policy 'static' models no costs"),
        (3, "adaptive", "must be a run directory, probe"),
        ({"intercept_s": [0.0], "per_sample_s": [1.0]}, "adaptive", "costs of 1 ranks"),
        ({"intercept_s": [-1.0, 0.0], "per_sample_s": [1.0, 1.0]}, "adaptive", ">= 0"),
        ({"intercept_s": [0.0, 0.0], "per_sample_s": [1.0, 0.0]}, "adaptive", "> 0"),
        ({"cluster": "c.yaml", "noise": 1}, "adaptive", "must be a run directory"),
    ],
)
def test_a_bad_warm_start_is_one_line_naming_the_key(value, policy, message):
    with pytest.raises(DynallocError, match=message) as caught:
        check_warm_start(value, policy, 2)
    assert str(caught.value).startswith("policy.warm_start")
