"""Faults a single host never shows, on the tests' two-node cluster (conftest.py), through the
shipped SLURM profile: a rank killed on the second node, the second node's link cut mid-run, the
time limit. Each ends the job quickly with a line saying what happened, and the train rule's
retry resumes the run from its last checkpoint without the user."""

import json
import os
import re
import signal
import time

import pytest
from dynalloc.runtime.common import checkpoint
from helpers import rank_pids, read_rows, wait_for
from slurmrun import profile_with, sbatch_jobs, start_on_slurm

pytestmark = [pytest.mark.mpi, pytest.mark.cluster]

RUN = "digits-mlp-static-node2-slow-r4-s0"
ITERATIONS = 300  # about 35 s of training here


def faults(iterations=ITERATIONS):
    """4 ranks, 2 per node, node n2's ranks emulated 10x slower so the run lasts."""
    return {
        "scenarios": {"node2-slow": {"slowdown": {2: 10, 3: 10}}},
        "grid": {
            "dataset": ["digits"],
            "model": ["mlp"],
            "policy": ["static"],
            "scenario": ["node2-slow"],
            "ranks": [4],
            "seed": [0],
        },
        "training": {
            "iterations": iterations,
            "checkpoint": {"every": 10, "keep": 2},
            "stall_timeout": 5,
        },
    }


def killed_tasks(tail, node):
    """The tasks srun says were killed on `node`: "tasks 2-3" in one line, or a line each."""
    tasks = set()
    for named in re.findall(rf"srun: error: {node}: tasks? ([\d,-]+): Killed", tail):
        for part in named.split(","):
            first, _, last = part.partition("-")
            tasks.update(range(int(first), int(last or first) + 1))
    return tasks


class Pipeline:
    """The pipeline of `faults()` through the shipped profile (2 ranks a node), in the
    background."""

    def __init__(
        self, started, tmp_path, iterations=ITERATIONS, training=None, slurm_extra="",
        **train_resources,
    ):  # fmt: skip
        self.results = tmp_path / "results"
        self.train_dir = self.results / "runs" / RUN / "train"
        self.status = self.results / "logs" / "train" / f"{RUN}.status"
        self.log = self.results / "logs" / "train" / f"{RUN}.log"
        self.iterations = iterations
        profile = profile_with(
            tmp_path, slurm_extra=f"--ntasks-per-node=2 {slurm_extra}".strip(), **train_resources
        )
        override = faults(iterations)
        override["training"].update(training or {})
        self.job = start_on_slurm(self.results, profile=profile, override=override)
        self.output = tmp_path / "snakemake.out"
        started.append(self)

    def wait_for_checkpoint(self, iteration=30):
        wait_for(
            lambda: (
                (
                    any(
                        int(p.stem.split("-")[1]) >= iteration
                        for p in checkpoint.existing(self.train_dir)
                    )
                    and rank_pids(self.train_dir)
                )
                or self.job.poll() is not None
            ),
            timeout=300,
            what="a checkpoint",
        )
        assert self.job.poll() is None, self.output.read_text()[-3000:]
        return rank_pids(self.train_dir)

    def first_attempt_ended(self, timeout=120):
        """(seconds it took, the status runtime.common.job kept of the first attempt)."""
        began = time.monotonic()
        wait_for(self.status.exists, timeout=timeout, what="the first attempt to end")
        return time.monotonic() - began, json.loads(self.status.read_text())

    def finish(self, slurm, timeout=600):
        """Wait for snakemake, returning nodes a fault drained to service meanwhile."""
        deadline = time.monotonic() + timeout
        while self.job.poll() is None and time.monotonic() < deadline:
            slurm.return_to_service()
            time.sleep(1)
        if self.job.poll() is None:
            self.job.kill()
            pytest.fail(f"snakemake still ran {timeout} s on:\n{self.output.read_text()[-3000:]}")
        assert self.job.returncode == 0, self.output.read_text()[-3000:]

    def assert_resumed_once(self):
        log = (self.train_dir / "train.log").read_text()
        assert "resuming from" in log, log
        keys = [
            (int(r["iteration"]), int(r["rank"]))
            for r in read_rows(self.train_dir / "iterations.csv")
        ]
        assert sorted(keys) == [(i, r) for i in range(self.iterations) for r in range(4)]


def test_a_rank_killed_on_the_second_node_ends_the_job_naming_it(slurm, tmp_path, started):
    pipeline = Pipeline(started, tmp_path)
    pids = pipeline.wait_for_checkpoint()
    os.kill(pids[3], signal.SIGKILL)
    took, status = pipeline.first_attempt_ended()
    print(f"a rank killed on n2: the job ended {took:.1f} s later (exit {status['code']})")
    tail = "\n".join(status["tail"])
    assert f"rank 3 (pid {pids[3]}) was lost" in tail, tail  # n2's peer watch
    assert killed_tasks(tail, "n2") == {2, 3}, tail  # srun's task number is the rank
    lost = f"ranks 2 (pid {pids[2]} on n2), 3 (pid {pids[3]} on n2) stopped answering"
    assert lost in tail, tail  # n1's ranks, signalled by srun, give up at once
    assert took < 30
    pipeline.finish(slurm)
    pipeline.assert_resumed_once()


def test_a_node_cut_off_mid_run_ends_the_job_as_a_stall_and_the_run_resumes_once_it_is_back(
    slurm, tmp_path, started
):
    pipeline = Pipeline(started, tmp_path)
    pids = pipeline.wait_for_checkpoint()
    slurm.link("n2", up=False)
    try:
        took, status = pipeline.first_attempt_ended()
    finally:
        slurm.link("n2", up=True)
    back = time.monotonic()
    print(f"n2 cut off: the job ended {took:.1f} s later (exit {status['code']})")
    assert status["code"] == 69, status
    tail = "\n".join(status["tail"])
    named = f"ranks 2 (pid {pids[2]} on n2), 3 (pid {pids[3]} on n2) stopped answering"
    assert named in tail, tail
    pipeline.finish(slurm)
    print(f"the rerun finished {time.monotonic() - back:.1f} s after n2 came back")
    pipeline.assert_resumed_once()


def test_the_time_limit_checkpoints_and_snakemake_retries_the_job_which_resumes(
    slurm, tmp_path, started
):
    # 3000 iterations take about 5 minutes: the first attempt meets its limit for sure. Once the
    # second resumed, snakemake is stopped (it cancels its jobs): a third would only repeat.
    pipeline = Pipeline(started, tmp_path, iterations=3000, runtime=1)  # minutes: SLURM's unit
    pipeline.wait_for_checkpoint()
    took, status = pipeline.first_attempt_ended(timeout=240)
    assert status["code"] == 75, status
    stopped = [line for line in status["tail"] if "stopped by SIGTERM after iteration" in line]
    assert stopped, status
    began = time.monotonic()
    wait_for(
        lambda: "resuming from" in (pipeline.train_dir / "train.log.partial").read_text(),
        timeout=240,
        what="the retry to resume",
    )
    print(f"time limit: {stopped[0]}; the retry resumed {time.monotonic() - began:.1f} s later")
    pipeline.job.send_signal(signal.SIGINT)  # Ctrl-C: snakemake cancels its jobs (SIGTERM: waits)
    pipeline.job.wait(300)  # the plugin waits out its status interval, grown to up to 180 s
    states = [state for state, _ in sbatch_jobs(pipeline.output.read_text())["train"]]
    assert states[0] == "TIMEOUT" and len(states) == 2 and states[1] != "TIMEOUT", states
