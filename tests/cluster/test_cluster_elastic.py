"""Elastic runs on the tests' two-node cluster, through the shipped SLURM profile: a rank
SIGKILLed on the second node, or the second node's link cut, mid-epoch -> the job's supervisor
launches the run again at once, from its last checkpoint, on the ranks that remain (srun
excluding a node cut off, within the job's allocation, which `--no-kill` keeps), and the run
finishes in its first attempt: no retry, no person, every iteration once."""

import os
import signal
import time

import pytest
from helpers import read_rows, wait_for
from test_cluster_faults import Pipeline

pytestmark = [pytest.mark.mpi, pytest.mark.cluster]

ELASTIC = {"elastic": {"min_ranks": 2, "max_restarts": 2}}


def training_again(pipeline, ranks, since):
    """Seconds from `since` to the first row of a launch of `ranks` ranks."""
    path = pipeline.train_dir / "iterations.csv.partial"
    wait_for(
        lambda: (
            (path.exists() and any(r["ranks"] == str(ranks) for r in read_rows(path)))
            or pipeline.job.poll() is not None
        ),
        timeout=120,
        what=f"an iteration on {ranks} ranks",
    )
    return time.monotonic() - since


def finished_on(pipeline, slurm, ranks):
    """The rows of a run that finished in its first attempt, the last launch on `ranks`."""
    pipeline.finish(slurm)
    assert not pipeline.status.exists(), "the first attempt failed: snakemake retried"
    rows = read_rows(pipeline.train_dir / "iterations.csv")
    keys = [(int(r["iteration"]), int(r["rank"])) for r in rows]
    assert len(keys) == len(set(keys)), "an iteration was logged twice"
    assert sorted({i for i, _ in keys}) == list(range(pipeline.iterations))
    assert rows[-1]["ranks"] == str(ranks)
    change = min(int(r["iteration"]) for r in rows if r["ranks"] == str(ranks))
    print(f"ranks 4 until iteration {change}, then {ranks}")
    return rows, change


def throughput(rows, ranks):
    """Samples a second over the iterations of a launch of `ranks` (the first of it aside)."""
    seconds = {}
    for r in rows:
        if r["ranks"] == str(ranks):
            seconds[int(r["iteration"])] = float(r["iteration_s"])
    kept = sorted(seconds)[1:]
    return 64 * len(kept) / sum(seconds[i] for i in kept)


def test_a_rank_killed_on_the_second_node_the_run_goes_on_with_three(slurm, tmp_path, started):
    pipeline = Pipeline(started, tmp_path, training=ELASTIC, slurm_extra="--no-kill")
    pids = pipeline.wait_for_checkpoint()
    os.kill(pids[3], signal.SIGKILL)
    again = training_again(pipeline, 3, since=time.monotonic())
    print(f"a rank killed on n2 -> an iteration on 3 ranks {again:.1f} s later")
    rows, change = finished_on(pipeline, slurm, 3)
    log = pipeline.log.read_text()
    assert "ranks [3] of the last launch lost; going on with 3 ranks" in log, log[-3000:]
    print(f"throughput: {throughput(rows, 4):.0f} samples/s on 4, {throughput(rows, 3):.0f} on 3")
    assert again < 60


def test_the_second_nodes_link_cut_the_run_goes_on_without_it(slurm, tmp_path, started):
    pipeline = Pipeline(started, tmp_path, training=ELASTIC, slurm_extra="--no-kill")
    pipeline.wait_for_checkpoint()
    slurm.link("n2", up=False)
    try:
        again = training_again(pipeline, 2, since=time.monotonic())
        print(f"n2 cut off -> an iteration on 2 ranks {again:.1f} s later")
        # The training ends on n1; the job completes once SLURM hears from n2 again or, were it
        # gone for good, declares it down (SlurmdTimeout, 300 s): n2 comes back here.
        trained = pipeline.train_dir / "metrics.json"
        wait_for(lambda: trained.exists() or pipeline.job.poll() is not None, timeout=300,
                 what="the training to end on n1")  # fmt: skip
    finally:
        slurm.link("n2", up=True)
    rows, change = finished_on(pipeline, slurm, 2)
    log = pipeline.log.read_text()
    assert "ranks [2, 3] of the last launch lost; going on with 2 ranks, without n2" in log
    print(f"throughput: {throughput(rows, 4):.0f} samples/s on 4, {throughput(rows, 2):.0f} on 2")
    assert again < 60
