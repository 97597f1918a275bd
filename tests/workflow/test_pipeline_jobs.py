"""The pipeline's training jobs as a user meets them: a `snakemake` killed alone does not leave
its training running, a stopped training is retried and resumes by itself, a failure that a
rerun would not cure is not retried."""

import contextlib
import csv
import os
import signal
import subprocess
import time

import pytest
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.peerwatch import alive
from helpers import SNAKEMAKE, rank_pids, snakemake, start_snakemake, wait_for

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]

ITERATIONS = 80
RUN = "digits-mlp-adaptive-slowdown-1-3-r2-s0"
OVERRIDE = {
    "grid": {"policy": ["adaptive"]},
    "scenarios": {"slowdown-1-3": {"slowdown": {1: 8}}},  # long enough to be stopped mid-run
    "training": {"iterations": ITERATIONS, "checkpoint": {"every": 5, "keep": 2}},
}


def checkpointed(train_dir, iteration=20):
    return any(int(p.stem.split("-")[1]) >= iteration for p in checkpoint.existing(train_dir))


def assert_resumed_and_logged_once(train_dir):
    log = (train_dir / "train.log").read_text()
    assert "resuming from" in log, log
    with open(train_dir / "iterations.csv", newline="") as handle:
        keys = [(int(r["iteration"]), int(r["rank"])) for r in csv.DictReader(handle)]
    assert sorted(keys) == [(i, r) for i in range(ITERATIONS) for r in range(2)]


def test_a_snakemake_killed_alone_stops_its_training_and_the_documented_recovery_works(
    tmp_path,
):
    results = tmp_path / "results"
    train_dir = results / "runs" / RUN / "train"
    job = start_snakemake(results=results, override=OVERRIDE)
    try:
        wait_for(lambda: checkpointed(train_dir) or job.poll() is not None, timeout=300)
        pids = rank_pids(train_dir)
        job.kill()  # snakemake alone: its jobs are re-parented, as after a lost login shell
        job.wait()
        began = time.monotonic()
        wait_for(lambda: not any(map(alive, pids.values())), timeout=60, what="the ranks to end")
        print(f"the training ended {time.monotonic() - began:.1f} s after snakemake")
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of that session
            os.killpg(job.pid, signal.SIGKILL)
    assert not (train_dir / "metrics.json").exists(), "the run finished before the kill"
    log = (results / "logs" / "train" / f"{RUN}.log").read_text()
    assert "the snakemake that started this job ended: stopping the training" in log, log
    assert "stopped by SIGTERM" in log, log
    assert snakemake("--unlock", results=results, override=OVERRIDE).returncode == 0
    rerun = snakemake("--rerun-incomplete", results=results, override=OVERRIDE)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert_resumed_and_logged_once(train_dir)


def test_a_training_stopped_by_a_signal_is_retried_and_resumes_by_itself(tmp_path):
    results = tmp_path / "results"
    train_dir = results / "runs" / RUN / "train"
    job = start_snakemake(results=results, override=OVERRIDE, output=subprocess.PIPE)
    try:
        wait_for(lambda: checkpointed(train_dir) or job.poll() is not None, timeout=300)
        os.kill(rank_pids(train_dir)[1], signal.SIGTERM)  # a scheduler's time limit
        output, _ = job.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of that session
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, output[-3000:]
    assert "Trying to restart job" in output, output[-3000:]
    assert_resumed_and_logged_once(train_dir)


def test_a_failure_a_rerun_would_not_cure_is_not_retried_and_its_log_is_shown(tmp_path):
    results = tmp_path / "results"
    diverging = {**OVERRIDE, "training": {**OVERRIDE["training"], "optimizer": {"lr": 1e12}}}
    began = time.monotonic()
    run = snakemake(results=results, override=diverging)
    took = time.monotonic() - began
    output = run.stdout + run.stderr
    assert run.returncode != 0
    log = (results / "logs" / "train" / f"{RUN}.log").read_text()
    assert "attempt 4 not started: attempt 1 ended with exit code 2" in log, log
    assert "the loss became" in log, log  # the failed attempt's own words, in the last log
    assert f"Logfile {results}/logs/train/{RUN}.log" in output, output[-3000:]  # shown
    train_log = (results / "runs" / RUN / "train" / "train.log.partial").read_text()
    assert train_log.count(" ranks, model ") == 1, train_log  # one training, not four
    print(f"the failing pipeline ended in {took:.1f} s")
