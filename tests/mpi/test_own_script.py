"""A user's own training script (`script:` in the run config) on real MPI ranks: it gets the run
directory `dynalloc train` writes, the same numbers, resume after a signal, and one line for the
mean-loss mistake."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from dynalloc.runtime.common import checkpoint
from helpers import dynalloc, parameters, rank_pids, read_rows, start_dynalloc, wait_for

pytestmark = pytest.mark.mpi

OWN_LOOP = Path(__file__).with_name("own_loop.py")
ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "own_script" / "train_resnet.py"


def write_config(tmp_path, name, **overrides):
    config = {
        "dataset": overrides.pop("dataset"),
        "model": "mlp",
        "global_batch": 64,
        "iterations": 40,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "policy": {"name": "static"},
        "scenario": {"slowdown": [1, 4]},
        "seed": 3,
        "checkpoint": {"every": 5, "keep": 3},
        **overrides,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def numbers(run_dir):
    """What a run computed, without its timings: the rows' shares and losses, the epochs'
    losses and accuracy."""
    rows = read_rows(run_dir / "iterations.csv")
    kept = [(r["iteration"], r["epoch"], r["rank"], r["batch_size"], r["loss"]) for r in rows]
    epochs = read_rows(run_dir / "epochs.csv")
    epochs = [(e["epoch"], e["train_loss"], e["test_accuracy"]) for e in epochs]
    return kept, epochs


def test_a_script_writes_what_dynalloc_train_writes(digits, tmp_path):
    builtin = write_config(tmp_path, "builtin", dataset=str(digits))
    script = write_config(tmp_path, "script", dataset=str(digits), script=str(OWN_LOOP))
    assert dynalloc("train", "--config", builtin, "--out", tmp_path / "a", ranks=2).returncode == 0
    result = dynalloc("train", "--config", script, "--out", tmp_path / "b", ranks=2)
    assert result.returncode == 0, result.stderr[-2000:]
    names = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "a").iterdir())
    assert numbers(tmp_path / "a") == numbers(tmp_path / "b")
    a, b = parameters(tmp_path / "a"), parameters(tmp_path / "b")
    assert all(np.array_equal(a[name], b[name]) for name in a)
    config = yaml.safe_load((tmp_path / "b" / "config.yaml").read_text())
    assert config["script"] == str(OWN_LOOP) and config["ranks"] == 2


def test_a_stopped_script_resumes_where_it_stopped(digits, tmp_path):
    config = write_config(tmp_path, "run", dataset=str(digits), script=str(OWN_LOOP))
    whole, out = tmp_path / "whole", tmp_path / "run"
    assert dynalloc("train", "--config", config, "--out", whole, ranks=2).returncode == 0
    job = start_dynalloc("train", "--config", config, "--out", out, ranks=2)
    wait_for(lambda: any(checkpoint.existing(out)), what="a checkpoint")
    os.kill(rank_pids(out)[1], signal.SIGTERM)
    _, stderr = job.communicate(timeout=60)
    assert job.returncode == 75, stderr
    result = dynalloc("train", "--config", config, "--out", out, ranks=2)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resuming from" in result.stderr
    iterations = [int(r["iteration"]) for r in read_rows(out / "iterations.csv")]
    assert sorted(iterations) == sorted(list(range(40)) * 2)
    a, b = parameters(whole), parameters(out)
    assert all(np.array_equal(a[name], b[name]) for name in a)


@pytest.mark.parametrize(
    ("mistake", "said"),
    [("--mean", "without .mean()"), ("--own-step", "remove your trainer.step()")],
)
def test_a_mean_loss_or_a_step_of_its_own_stops_with_one_line(digits, tmp_path, mistake, said):
    config = write_config(
        tmp_path, "run", dataset=str(digits), script=str(OWN_LOOP), script_args=[mistake]
    )
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr[-2000:]
    assert "iterations.csv" not in os.listdir(tmp_path / "run")


def test_epochs_without_a_test_loss_are_logged(digits, tmp_path):
    config = write_config(
        tmp_path, "run", dataset=str(digits), script=str(OWN_LOOP),
        script_args=["--accuracy-only"], iterations=None, epochs=2,
    )  # fmt: skip
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    log = (tmp_path / "run" / "train.log").read_text()
    assert "Traceback" not in log, log
    assert len(re.findall(r"epoch \d: [\d.]+ s, train loss [\d.]+, test accuracy 0.5000", log)) == 2
    epochs = read_rows(tmp_path / "run" / "epochs.csv")
    assert [(e["test_loss"], e["test_accuracy"]) for e in epochs] == [("", "0.5")] * 2


def test_a_script_outside_dynalloc_train_is_told_how_to_run():
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DYNALLOC_")}
    alone = subprocess.run(
        [sys.executable, str(OWN_LOOP)], capture_output=True, text=True, env=environment
    )
    assert alone.returncode == 2
    assert alone.stderr.strip().splitlines() == [
        "dynalloc train: error: DYNALLOC_CONFIG and DYNALLOC_RUN_DIR not set: run the script "
        "through `dynalloc train` with `script:` in its run config (or set them to a run "
        "config and directory)"
    ]


def test_the_example_script_trains_a_zoo_network(digits, tmp_path):
    config = write_config(
        tmp_path,
        "example",
        dataset=str(digits),
        script=str(EXAMPLE),
        script_args=["--shift", "1"],
        iterations=12,
        min_share=8,
        policy={"name": "adaptive"},
    )
    raw = yaml.safe_load(config.read_text())
    del raw["model"], raw["optimizer"]  # the script builds its own: its config names neither
    config.write_text(yaml.safe_dump(raw))
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_rows(tmp_path / "run" / "iterations.csv")
    assert len(rows) == 24 and min(int(r["batch_size"]) for r in rows) >= 8
    assert (tmp_path / "run" / "model.params").stat().st_size > 100_000  # ResNet-18, not the MLP
    recorded = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert recorded["script"] == str(EXAMPLE)
    assert recorded["model"] is None and recorded["optimizer"] is None  # none it never built
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["model"] == "train_resnet"


def test_a_script_building_through_dynalloc_without_a_model_is_told_in_one_line(digits, tmp_path):
    config = write_config(tmp_path, "run", dataset=str(digits), script=str(OWN_LOOP))
    raw = yaml.safe_load(config.read_text())
    del raw["model"]
    config.write_text(yaml.safe_dump(raw))
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "config key 'model' is unset" in lines[0], result.stderr[-2000:]
