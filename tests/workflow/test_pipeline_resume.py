"""A pipeline whose training job is killed mid-run finishes on the rerun, from its checkpoint."""

import csv
import os
import signal

import pytest
from dynalloc.runtime.common import checkpoint
from helpers import SNAKEMAKE, snakemake, start_snakemake, wait_for

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]

ITERATIONS = 80
OVERRIDE = {
    "grid": {"policy": ["adaptive"]},
    "scenarios": {"slowdown-1-3": {"slowdown": {1: 8}}},  # long enough to be killed mid-run
    "training": {"iterations": ITERATIONS, "checkpoint": {"every": 5, "keep": 2}},
}


def test_killed_pipeline_reruns_to_completion_from_the_checkpoint(tmp_path):
    results = tmp_path / "results"
    train_dir = results / "runs" / "digits-mlp-adaptive-slowdown-1-3-r2-s0" / "train"
    log = tmp_path / "snakemake.log"
    with open(log, "w") as output:
        job = start_snakemake(results=results, override=OVERRIDE, output=output)
    try:
        wait_for(
            lambda: (
                any(int(p.stem.split("-")[1]) >= 20 for p in checkpoint.existing(train_dir))
                or job.poll() is not None
            ),
            timeout=300,
            what="a checkpoint of the training job",
        )
    finally:  # the whole session at once, as when a node or a login shell dies
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert job.returncode == -signal.SIGKILL, (
        f"snakemake ended by itself (exit {job.returncode}) before the kill: "
        f"{log.read_text()[-3000:]}"
    )
    assert not (train_dir / "metrics.json").exists(), "the run finished before the kill"
    assert snakemake("--unlock", results=results, override=OVERRIDE).returncode == 0
    rerun = snakemake("--rerun-incomplete", results=results, override=OVERRIDE)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    log = (train_dir / "train.log").read_text()
    assert "resuming from" in log, log
    with open(train_dir / "iterations.csv", newline="") as handle:
        keys = [(int(r["iteration"]), int(r["rank"])) for r in csv.DictReader(handle)]
    assert sorted(keys) == [(i, r) for i in range(ITERATIONS) for r in range(2)]
    assert (results / "summary.csv").exists() and (results / "speedup.csv").exists()
