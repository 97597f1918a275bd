"""`policy.warm_start` through `dynalloc train` on real ranks: a run started from a previous
run's costs, or from a probe, takes the balanced split at its first iteration, and trains the
same model as one process (the SGD is untouched); what does not fit is one line and exit 2."""

import json

import numpy as np
import pytest
import yaml
from helpers import dynalloc, parameters, read_rows

pytestmark = pytest.mark.mpi

BATCH = 128
SLOW = {"slowdown": [1, 8]}  # 8x: other tests' jobs loading rank 0's core must not hide it


def train(folder, name, ranks, dataset, **overrides):
    config = {
        "dataset": str(dataset), "model": "mlp", "global_batch": BATCH, "iterations": 24,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9}, "seed": 3,
        "policy": {"name": "adaptive"}, **overrides,
    }  # fmt: skip
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    out = folder / name
    result = dynalloc("train", "--config", path, "--out", out, ranks=None if ranks == 1 else ranks)
    return result, out


def shares_of(run):
    by_iteration = {}
    for row in read_rows(run / "iterations.csv"):
        by_iteration.setdefault(int(row["iteration"]), []).append(int(row["batch_size"]))
    return [by_iteration[i] for i in sorted(by_iteration)]


def worst_difference(a, b):
    expected, got = parameters(a), parameters(b)
    return max(float(np.abs(expected[k] - got[k]).max()) for k in expected)


@pytest.fixture(scope="module")
def runs(digits, tmp_path_factory):
    """One process (the reference), and a cold adaptive run of 2 ranks, rank 1 8x slower."""
    folder = tmp_path_factory.mktemp("warm")
    one, reference = train(folder, "one", 1, digits, policy={"name": "static"})
    assert one.returncode == 0, one.stderr
    cold, previous = train(folder, "cold", 2, digits, scenario=SLOW)
    assert cold.returncode == 0, cold.stderr
    return folder, reference, previous


def test_a_run_started_from_a_previous_runs_costs_is_balanced_from_its_first_iteration(
    digits, runs
):
    folder, reference, previous = runs
    result, warm = train(
        folder, "warm", 2, digits, scenario=SLOW, policy={"name": "adaptive",
                                                          "warm_start": str(previous)}
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, settled = shares_of(warm)[0], shares_of(previous)[-2]
    assert first[0] > first[1], f"the first iteration ran at {first}"
    assert abs(first[1] - settled[1]) <= 0.1 * BATCH, (first, settled)
    recorded = yaml.safe_load((warm / "config.yaml").read_text())["policy"]["warm_start"]
    assert recorded["source"] == str(previous) and len(recorded["per_sample_s"]) == 2
    assert worst_difference(reference, warm) <= 1e-4  # the same SGD as one process


def test_a_probe_times_each_rank_before_the_first_iteration(digits, runs):
    folder, reference, _ = runs
    result, probed = train(
        folder, "probed", 2, digits, scenario=SLOW, policy={"name": "adaptive",
                                                            "warm_start": "probe"}
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first = shares_of(probed)[0]
    assert first[0] > first[1], f"the first iteration ran at {first}"
    metrics = json.loads((probed / "metrics.json").read_text())
    assert 0 < metrics["probe_s"] < metrics["wall_s"]
    assert "warm start: the probe took" in (probed / "train.log").read_text()
    assert worst_difference(reference, probed) <= 1e-4


@pytest.mark.parametrize(
    ("policy", "ranks", "message"),
    [
        ({"name": "static", "warm_start": "probe"}, 2, "policy 'static' models no costs"),
        ({"name": "adaptive", "warm_start": "PREVIOUS"}, 3, "ran on 2 ranks, this run has 3"),
        ({"name": "adaptive", "warm_start": "NOWHERE"}, 2, "is not a run directory"),
    ],
)
def test_a_warm_start_that_does_not_fit_is_one_line_and_exit_2(
    digits, runs, tmp_path, policy, ranks, message
):
    _, _, previous = runs
    if policy["warm_start"] in ("PREVIOUS", "NOWHERE"):
        policy = {**policy, "warm_start": str(previous if "PREV" in policy["warm_start"]
                                              else tmp_path)}  # fmt: skip
    result, out = train(tmp_path, "bad", ranks, digits, policy=policy)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not out.exists()
