"""`dynalloc baseline` (MXNet dist_sync on localhost) with real processes: the run directory,
the same model as `dynalloc train` with policy static, and failures that leave nothing behind."""

import contextlib
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from dynalloc.runtime.common.peerwatch import alive
from helpers import BIN, ENV, dynalloc, parameters, read_rows, wait_for

pytestmark = pytest.mark.mpi

BATCH = 64
ITERATIONS = 30  # digits: 1438 samples = 22 batches of 64 + one of 30, so a smaller batch too


def write_config(path, dataset, **overrides):
    config = {
        "dataset": str(dataset),
        "model": "mlp",
        "global_batch": BATCH,
        "iterations": ITERATIONS,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "wd": 0.0001},
        "policy": {"name": "static"},
        "scenario": {"slowdown": [1, 2]},
        "seed": 3,
        **overrides,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def runs(digits, tmp_path_factory):
    """The baseline (its config names another policy, which it ignores) and the static run."""
    tmp = tmp_path_factory.mktemp("baseline")
    config = write_config(tmp / "baseline.yaml", digits, policy={"name": "adaptive"})
    baseline = dynalloc("baseline", "--config", config, "--out", tmp / "dist", "--workers", 2)
    assert baseline.returncode == 0, baseline.stderr
    assert "policy 'adaptive' ignored" in baseline.stderr
    config = write_config(tmp / "static.yaml", digits)
    static = dynalloc("train", "--config", config, "--out", tmp / "static", ranks=2)
    assert static.returncode == 0, static.stderr
    return tmp / "dist", tmp / "static"


def test_run_directory_holds_the_files_of_train(runs):
    dist, static = runs
    files = sorted(p.name for p in dist.iterdir())  # train's files; no checkpoints, no .baseline
    assert files == sorted(p.name for p in static.iterdir() if p.name != "checkpoints")
    assert "model.params" in files and "train.log" in files
    metrics = json.loads((dist / "metrics.json").read_text())
    assert metrics.keys() == json.loads((static / "metrics.json").read_text()).keys()
    assert metrics["policy"] == "dist_sync" and metrics["ranks"] == 2
    assert metrics["iterations"] == ITERATIONS and metrics["samples_per_s"] > 0
    epochs = read_rows(dist / "epochs.csv")
    assert list(epochs[0]) == ["epoch", "wall_s", "train_loss", "test_loss", "test_accuracy"]
    assert [int(e["epoch"]) for e in epochs] == [0, 1]
    assert metrics["final_test_accuracy"] == pytest.approx(float(epochs[-1]["test_accuracy"]))
    assert metrics["wall_s"] == pytest.approx(float(epochs[-1]["wall_s"]))
    resolved = yaml.safe_load((dist / "config.yaml").read_text())
    assert resolved["policy"] == {"name": "static"} and resolved["ranks"] == 2
    assert "dist_sync" in (dist / "train.log").read_text()


def test_final_parameters_match_train_with_policy_static(runs):
    dist, static = runs
    expected, got = parameters(static), parameters(dist)
    assert expected.keys() == got.keys()
    worst = max(float(np.abs(expected[k] - got[k]).max()) for k in expected)
    print(f"largest parameter difference, dist_sync vs static: {worst:.3g}")
    assert worst <= 1e-4, worst
    epochs = zip(read_rows(dist / "epochs.csv"), read_rows(static / "epochs.csv"), strict=True)
    for mine, theirs in epochs:
        assert float(mine["test_accuracy"]) == pytest.approx(float(theirs["test_accuracy"]))


def test_iterations_have_train_columns_and_equal_shares(runs):
    dist, static = runs
    rows, theirs = read_rows(dist / "iterations.csv"), read_rows(static / "iterations.csv")
    assert list(rows[0]) == list(theirs[0])
    assert len(rows) == 2 * ITERATIONS
    # The same samples per rank and iteration as static: the same equal split of each batch.
    assert [(r["iteration"], r["rank"], r["batch_size"]) for r in rows] == [
        (r["iteration"], r["rank"], r["batch_size"]) for r in theirs
    ]
    for iteration in range(ITERATIONS):
        mine = [r for r in rows if int(r["iteration"]) == iteration]
        assert [int(r["rank"]) for r in mine] == [0, 1]
        assert len({int(r["batch_size"]) for r in mine}) == 1
        busy = [float(r["compute_s"]) + float(r["data_s"]) for r in mine]  # as train counts it
        for r, own in zip(mine, busy, strict=True):
            assert float(r["wait_s"]) == pytest.approx(max(busy) - own)
            assert float(r["sync_s"]) > 0 and float(r["iteration_s"]) >= float(r["compute_s"])
            assert r["policy"] == "dist_sync"
        assert [float(r["slowdown"]) for r in mine] == [1.0, 2.0]
    assert {int(r["batch_size"]) for r in rows} == {32, 15}


def test_bad_dataset_fails_in_one_line_before_starting_anything(tmp_path):
    config = write_config(tmp_path / "run.yaml", tmp_path / "missing")
    result = dynalloc("baseline", "--config", config, "--out", tmp_path / "run", "--workers", 2)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"dynalloc baseline: error: {tmp_path / 'missing'}: staged dataset directory not found"
    ]
    assert not (tmp_path / "run").exists()


def children(pid):
    """{pid: command line} of the processes `pid` started."""
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError):  # it exited meanwhile
            found[int(child)] = Path(f"/proc/{child}/cmdline").read_text().replace("\0", " ")
    return found


def test_a_killed_worker_stops_every_process_with_one_line(digits, tmp_path):
    config = write_config(tmp_path / "run.yaml", digits, iterations=1_000_000)
    out = tmp_path / "run"
    command = [str(BIN / "dynalloc"), "baseline", "--config", str(config), "--out", str(out)]
    launcher = subprocess.Popen(
        [*command, "--workers", "2"], stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        wait_for(lambda: (out / "train.log.partial").exists(), timeout=120, what="training")
        started = children(launcher.pid)
        assert len(started) == 4, started  # scheduler, server, two workers
        (victim,) = [
            pid for pid, line in started.items() if "worker" in line and "--index 1" in line
        ]
        subprocess.run(["kill", "-KILL", str(victim)], check=True)
        began = time.monotonic()
        _, stderr = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert time.monotonic() - began < 10
    assert launcher.returncode == 2
    errors = [line for line in stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("dynalloc baseline: error: worker 1 (pid")
    assert "SIGKILL" in errors[0]
    assert not [pid for pid in started if alive(pid)]


def test_a_worker_error_is_reported_as_its_own_line(digits, tmp_path):
    config = write_config(tmp_path / "run.yaml", digits, optimizer={"name": "sgd", "lr": 1.0e6})
    result = dynalloc("baseline", "--config", config, "--out", tmp_path / "run", "--workers", 2)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "the loss became nan at iteration" in errors[0], result.stderr
    assert errors[0].startswith("dynalloc baseline: error: worker ")
