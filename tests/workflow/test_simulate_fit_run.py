"""The fitted simulator against real runs: `dynalloc train` on two MPI ranks (LeNet on the
MNIST digits, rank 1 emulated twice as slow, static and adaptive), each fitted by the workflow
environment's `dynalloc simulate --fit` and its own policy driven through the fit."""

import csv
import subprocess

import numpy as np
import pytest
import yaml
from helpers import ROOT, SNAKEMAKE, dynalloc, read_rows

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.quiet,  # a loaded machine's fixed costs shrink what the slow rank costs static
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]
WORKFLOW_DYNALLOC = SNAKEMAKE.with_name("dynalloc")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit")
    staged = dynalloc("stage", "--source", "mnist5k", "--out", root / "mnist5k")
    assert staged.returncode == 0, staged.stderr
    made = {}
    for policy in ("static", "adaptive"):
        config = root / f"{policy}.yaml"
        config.write_text(yaml.safe_dump({
            "dataset": str(root / "mnist5k"), "model": "lenet", "global_batch": 256,
            "iterations": 40, "policy": {"name": policy}, "scenario": {"slowdown": [1, 2]},
            "optimizer": {"name": "sgd", "lr": 0.02, "momentum": 0.9},
        }))  # fmt: skip
        made[policy] = root / policy
        done = dynalloc("train", "--config", config, "--out", made[policy], ranks=2)
        assert done.returncode == 0, done.stderr[-3000:]
    return made


def measured_mean_s(run_dir):
    """The run's mean iteration time after the first (MXNet's warm-up)."""
    slowest = {}
    for row in read_rows(run_dir / "iterations.csv"):
        i = int(row["iteration"])
        slowest[i] = max(slowest.get(i, 0.0), float(row["iteration_s"]))
    return float(np.mean([seconds for i, seconds in slowest.items() if i > 0]))


@pytest.mark.parametrize("policy", ["static", "adaptive"])
def test_the_fit_of_a_real_run_predicts_its_mean_iteration_time(runs, policy, tmp_path):
    plan, fitted = tmp_path / "plan.csv", tmp_path / "fitted.yaml"
    done = subprocess.run(
        [WORKFLOW_DYNALLOC, "simulate", "--fit", runs[policy], "--save-fit", fitted,
         "--policies", "static", "adaptive", "--out", plan],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open(plan, newline="") as handle:
        predicted = {row["policy"]: float(row["mean_s"]) for row in csv.DictReader(handle)}
    # 15%: the machine's other load moves a run of 40 iterations by more than the model errs
    assert predicted[policy] == pytest.approx(measured_mean_s(runs[policy]), rel=0.15)
    spec = yaml.safe_load(fitted.read_text())
    assert [g["slowdown"] for g in spec["groups"]] == [1.0, 2.0]
    assert predicted["static"] > 1.2 * predicted["adaptive"]  # the slow rank made static wait
