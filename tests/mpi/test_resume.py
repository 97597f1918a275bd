"""Checkpoints on real MPI ranks: a run killed mid-way and resumed ends where the uninterrupted
run ends, with every iteration logged exactly once."""

import os
import signal

import numpy as np
import pytest
import yaml
from dynalloc.runtime.common import checkpoint
from helpers import dynalloc, parameters, rank_pids, read_rows, start_dynalloc, wait_for

pytestmark = pytest.mark.mpi

ITERATIONS = 60
KILL_AFTER = 20  # iterations: the newest checkpoint when the kill is sent


def write_config(tmp_path, name, **overrides):
    config = {
        "model": "mlp",
        "global_batch": 64,
        "iterations": ITERATIONS,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "policy": {"name": "adaptive"},
        "scenario": {"slowdown": [1, 8]},  # rank 1 sleeps: the run lasts long enough to kill
        "seed": 3,
        "checkpoint": {"every": 5, "keep": 3},
        "labels": {"run": name},  # bookkeeping only: may differ between the runs compared
    }
    config.update(overrides)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def train(config, out, ranks):
    return dynalloc("train", "--config", config, "--out", out, ranks=ranks)


def checkpointed(out, iteration):
    return any(
        int(p.stem.split("-")[1]) >= iteration for p in checkpoint.existing(out)
    ) and rank_pids(out)


def kill_a_rank(config, out, ranks, after=KILL_AFTER):
    """Start a run, SIGKILL its last rank once a checkpoint of `after` iterations exists."""
    job = start_dynalloc("train", "--config", config, "--out", out, ranks=ranks)
    wait_for(lambda: checkpointed(out, after) or job.poll() is not None, what="a checkpoint")
    assert job.poll() is None, "the run ended before it could be killed"
    os.kill(rank_pids(out)[ranks - 1], signal.SIGKILL)
    _, stderr = job.communicate(timeout=30)
    assert job.returncode != 0 and not (out / "metrics.json").exists(), stderr
    return stderr


def worst_difference(a, b):
    expected, got = parameters(a), parameters(b)
    assert expected.keys() == got.keys()
    return max(float(np.abs(expected[k] - got[k]).max()) for k in expected)


def assert_logged_once(out, ranks):
    rows = read_rows(out / "iterations.csv")
    keys = [(int(r["iteration"]), int(r["rank"])) for r in rows]
    assert sorted(keys) == [(i, r) for i in range(ITERATIONS) for r in range(ranks)]
    epochs = [int(r["epoch"]) for r in read_rows(out / "epochs.csv")]
    assert epochs == list(range(len(epochs))), epochs


@pytest.mark.parametrize(
    ("policy", "ranks", "tolerance"),
    [("static", 2, 1e-5), ("static", 3, 1e-5), ("adaptive", 2, 1e-4), ("adaptive", 3, 1e-4)],
)
def test_killed_and_resumed_run_ends_like_the_uninterrupted_one(
    digits, tmp_path, policy, ranks, tolerance
):
    slowdown = [1, 8, 2][:ranks]
    config = write_config(
        tmp_path,
        "run",
        dataset=str(digits),
        policy={"name": policy},
        scenario={"slowdown": slowdown},
    )
    whole = train(config, tmp_path / "whole", ranks)
    assert whole.returncode == 0, whole.stderr
    kill_a_rank(config, tmp_path / "resumed", ranks)
    resumed = train(config, tmp_path / "resumed", ranks)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "resuming from" in resumed.stderr
        and "resuming from" in (tmp_path / "resumed" / "train.log").read_text()
    )
    assert_logged_once(tmp_path / "resumed", ranks)
    worst = worst_difference(tmp_path / "whole", tmp_path / "resumed")
    print(f"{policy} R={ranks}: max |difference| {worst:.2e}")
    assert worst <= tolerance


def test_resume_may_change_the_policy_and_the_number_of_ranks(digits, tmp_path):
    config = write_config(tmp_path, "two", dataset=str(digits), policy={"name": "static"})
    whole = train(config, tmp_path / "whole", 2)
    assert whole.returncode == 0, whole.stderr
    kill_a_rank(config, tmp_path / "run", 2)
    other = write_config(
        tmp_path,
        "three",
        dataset=str(digits),
        policy={"name": "adaptive"},
        scenario={"slowdown": [1, 8, 2]},
    )
    resumed = train(other, tmp_path / "run", 3)
    assert resumed.returncode == 0, resumed.stderr
    assert "shares start afresh" in (tmp_path / "run" / "train.log").read_text()
    rows = read_rows(tmp_path / "run" / "iterations.csv")
    ranks_per_iteration = {int(r["iteration"]): int(r["rank"]) + 1 for r in rows}
    assert ranks_per_iteration[0] == 2 and ranks_per_iteration[ITERATIONS - 1] == 3
    assert worst_difference(tmp_path / "whole", tmp_path / "run") <= 1e-4  # the same SGD


def test_a_policy_state_of_another_version_starts_afresh_instead_of_failing(digits, tmp_path):
    """A checkpoint written before adaptive had its warm-up flag: the resumed run used to stop
    with an AttributeError at its first update."""
    config = write_config(tmp_path, "run", dataset=str(digits))
    kill_a_rank(config, tmp_path / "run", 2)
    newest = checkpoint.existing(tmp_path / "run")[0]
    saved = checkpoint.read(newest)
    del saved["policy"]["attributes"]["warm_up"]  # the policy's state as plain data
    newest.unlink()
    checkpoint.write(tmp_path / "run", saved["iteration"], saved, keep=3)
    resumed = train(config, tmp_path / "run", 2)
    assert resumed.returncode == 0, resumed.stderr
    assert "policy state is another version's: shares start afresh" in resumed.stderr
    assert_logged_once(tmp_path / "run", 2)


@pytest.mark.parametrize(("key", "value"), [("global_batch", 32), ("model", "lenet")])
def test_resume_with_another_model_or_batch_is_refused(digits, tmp_path, key, value):
    config = write_config(tmp_path, "run", dataset=str(digits))
    kill_a_rank(config, tmp_path / "run", 2)
    before = sorted(checkpoint.existing(tmp_path / "run"))
    changed = write_config(tmp_path, "changed", dataset=str(digits), **{key: value})
    result = train(changed, tmp_path / "run", 2)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"belongs to a run with {key}" in lines[0], result.stderr
    assert sorted(checkpoint.existing(tmp_path / "run")) == before


def test_corrupt_newest_checkpoint_is_reported_and_the_previous_used(digits, tmp_path):
    config = write_config(tmp_path, "run", dataset=str(digits), policy={"name": "static"})
    whole = train(config, tmp_path / "whole", 2)
    assert whole.returncode == 0, whole.stderr
    kill_a_rank(config, tmp_path / "run", 2)
    newest, previous = checkpoint.existing(tmp_path / "run")[:2]
    newest.write_bytes(newest.read_bytes()[:1000])
    resumed = train(config, tmp_path / "run", 2)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{newest} is truncated or corrupted" in resumed.stderr
    assert f"resuming from {previous}" in resumed.stderr
    assert_logged_once(tmp_path / "run", 2)
    assert worst_difference(tmp_path / "whole", tmp_path / "run") <= 1e-5


def test_rerun_of_a_finished_run_rewrites_it_and_a_changed_config_starts_afresh(digits, tmp_path):
    config = write_config(tmp_path, "run", dataset=str(digits), policy={"name": "static"})
    out = tmp_path / "run"
    assert train(config, out, 2).returncode == 0
    first = (out / "iterations.csv").read_text(), parameters(out)
    again = train(config, out, 2)
    assert again.returncode == 0, again.stderr
    assert f"(iteration {ITERATIONS})" in again.stderr  # nothing left to train
    assert (out / "iterations.csv").read_text() == first[0]
    rewritten = parameters(out)
    assert all(np.array_equal(first[1][k], rewritten[k]) for k in first[1])
    changed = write_config(tmp_path, "run", dataset=str(digits), policy={"name": "static"}, seed=4)
    fresh = train(changed, out, 2)
    assert fresh.returncode == 0, fresh.stderr
    assert "finished run of another config: starting afresh" in fresh.stderr
    assert_logged_once(out, 2)


def test_a_streamed_run_resumes_on_the_same_pixels(streamed_digits, tmp_path):
    """The augmentation of a streamed sample depends on (seed, epoch, index) only: a resumed run
    decodes what the uninterrupted one decoded, and ends with the same parameters."""
    config = write_config(
        tmp_path,
        "run",
        dataset=str(streamed_digits),
        stream={"input_size": 16, "decode_workers": 1},
    )
    whole = train(config, tmp_path / "whole", 2)
    assert whole.returncode == 0, whole.stderr
    kill_a_rank(config, tmp_path / "resumed", 2)
    resumed = train(config, tmp_path / "resumed", 2)
    assert resumed.returncode == 0 and "resuming from" in resumed.stderr, resumed.stderr
    assert_logged_once(tmp_path / "resumed", 2)
    assert worst_difference(tmp_path / "whole", tmp_path / "resumed") <= 1e-4
