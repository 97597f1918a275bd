"""`dynalloc train` of a `framework: torch` run: the same run directory as an MXNet run, the same
model whatever the ranks and shares, resume after a stop, bad input in one line."""

import csv
import json

import numpy as np
import pytest
import torch
import yaml
from launchers import dynalloc_train, stage_digits, stopped_at_a_checkpoint


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return stage_digits(tmp_path_factory.mktemp("data") / "digits")


def config(folder, digits, **keys):
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({
        "dataset": str(digits), "framework": "torch", "model": "lenet", "global_batch": 128,
        "epochs": 2, "policy": {"name": "adaptive"}, "scenario": {"slowdown": [1, 3, 1]},
        "optimizer": {"name": "sgd", "lr": 0.02, "momentum": 0.9,
                      "schedule": {"name": "cosine", "warmup": 3}},
        **keys,
    }))  # fmt: skip
    return path


def parameters(run):
    state = torch.load(run / "model.params")
    return np.concatenate([v.numpy().ravel() for v in state.values()])


@pytest.fixture(scope="module")
def one_rank(digits, tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    result = dynalloc_train(1, config(folder, digits, scenario={}), folder / "run")
    assert result.returncode == 0, result.stderr
    return folder / "run"


def test_a_torch_run_writes_the_run_directory_of_the_contract(one_rank):
    names = {p.name for p in one_rank.iterdir()}
    assert {"config.yaml", "iterations.csv", "epochs.csv", "metrics.json", "train.log",
            "model.params", "checkpoints"} <= names  # fmt: skip
    with open(one_rank / "iterations.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {"iteration", "rank", "batch_size", "compute_s", "sync_s", "wait_s"} <= rows[0].keys()
    metrics = json.loads((one_rank / "metrics.json").read_text())
    assert metrics["iterations"] == 2 * 12  # 1,437 training digits, 128 a batch
    assert metrics["final_test_accuracy"] > 0.2  # learns: chance is 0.1


@pytest.mark.parametrize("launcher", ["torchrun", "mpiexec"])
def test_three_ranks_under_adaptive_train_the_model_of_one(digits, one_rank, tmp_path, launcher):
    result = dynalloc_train(3, config(tmp_path, digits), tmp_path / "run", launcher)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "run" / "iterations.csv", newline="") as handle:
        shares = {int(row["batch_size"]) for row in csv.DictReader(handle)}
    assert len(shares) > 3, "the shares never moved: nothing was tested"
    assert np.abs(parameters(tmp_path / "run") - parameters(one_rank)).max() < 1e-5


def test_a_stopped_run_resumes_to_the_parameters_of_an_uninterrupted_one(digits, tmp_path):
    """Bit for bit: the optimizer's and the schedule's state come back with the parameters
    (`static`, whose shares do not follow the machine's timings, as `adaptive`'s do)."""
    path = config(tmp_path, digits, epochs=6, checkpoint={"every": 5, "keep": 2},
                  scenario={}, policy={"name": "static"})  # fmt: skip
    whole = dynalloc_train(2, path, tmp_path / "whole", "mpiexec")
    assert whole.returncode == 0, whole.stderr
    out = tmp_path / "stopped"
    returncode, stderr = stopped_at_a_checkpoint(path, out)
    assert returncode == 75, stderr
    assert "checkpoint" in stderr and not (out / "model.params").exists()
    again = dynalloc_train(2, path, out, "mpiexec")
    assert again.returncode == 0, again.stderr
    assert "resuming from" in again.stderr
    assert np.array_equal(parameters(out), parameters(tmp_path / "whole"))


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"framework": "jax"}, "config key 'framework' must be one of mxnet, torch"),
        ({"model": {"zoo": "resnet18_v1"}}, "model.zoo' names a network of MXNet's model zoo"),
        ({"model": "alexnet"}, "model: unknown model 'alexnet'"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(digits, tmp_path, keys, message):
    result = dynalloc_train(2, config(tmp_path, digits, scenario={}, **keys), tmp_path / "run")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("dynalloc train:")]
    assert len(lines) == 1 and message in lines[0], result.stderr[-2000:]
    assert not (tmp_path / "run").exists()
