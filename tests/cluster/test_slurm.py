"""The pipeline through workflow/profiles/slurm on a real one-node SLURM cluster (conftest.py):
every job an sbatch job, training an MPI job of 2 tasks, results equal to a local run's."""

import csv
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import ROOT, parameters, snakemake

PROFILE = ROOT / "workflow" / "profiles" / "slurm"
STATIC = "digits-mlp-static-slowdown-1-3-r2-s0"
RUNS = [STATIC, "digits-mlp-adaptive-slowdown-1-3-r2-s0"]
# The profile's TEST keys: squeue, as this cluster has no accounting database; quick polling.
NO_ACCOUNTING = [
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "1",
]

pytestmark = [pytest.mark.mpi, pytest.mark.cluster, pytest.mark.usefixtures("slurm")]


def on_slurm(results, *args, profile=PROFILE, **kwargs):
    """Snakemake through a SLURM profile; the SLURM logs go beside `results`."""
    logs = results.parent / "slurm-logs"
    profile_args = ["--workflow-profile", profile, *NO_ACCOUNTING, "--slurm-logdir", logs]
    return snakemake(*profile_args, *args, results=results, **kwargs)


def output(run):
    return run.stdout + run.stderr


def sbatch_jobs(run):
    """{rule: sorted [(state, cpus)]} of the SLURM jobs that one snakemake run submitted."""
    run_id = re.search(r"SLURM run ID: (\S+)", output(run)).group(1)
    squeue = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--name", run_id, "--format=%k|%T|%C"],
        capture_output=True,
        text=True,
        check=True,
    )
    jobs = {}
    for line in squeue.stdout.splitlines():
        comment, state, cpus = line.split("|")  # comment: rule_<rule>[_wildcards_<values>]
        rule = comment.removeprefix("rule_").split("_wildcards_")[0]
        jobs.setdefault(rule, []).append((state, int(cpus)))
    return {rule: sorted(states) for rule, states in jobs.items()}


def shape(path):
    """(header, number of rows) of a CSV file."""
    with open(path, newline="") as handle:
        header, *rows = csv.reader(handle)
    return header, len(rows)


def assert_same_run(results, reference, run):
    for name in ["iterations.csv", "epochs.csv"]:
        got, want = (r / "runs" / run / "train" / name for r in (results, reference))
        assert shape(got) == shape(want), f"{run}/{name}"


def assert_same_parameters(results, reference):
    got, want = (parameters(r / "runs" / STATIC / "train") for r in (results, reference))
    assert got.keys() == want.keys()
    difference = max(float(np.abs(got[name] - want[name]).max()) for name in want)
    assert difference <= 1e-4, f"static final parameters differ by {difference}"


@pytest.fixture(scope="module")
def on_srun(tmp_path_factory):
    """The whole tiny pipeline through the shipped profile as it is: ranks started by srun."""
    results = tmp_path_factory.mktemp("srun") / "results"
    run = on_slurm(results)
    assert run.returncode == 0, output(run)[-3000:]
    return results, run


def test_every_job_is_an_sbatch_job_and_training_has_two_tasks(on_srun):
    _, run = on_srun
    assert sbatch_jobs(run) == {
        "stage_dataset": [("COMPLETED", 1)],
        "run_config": [("COMPLETED", 1)] * 2,
        "train": [("COMPLETED", 2)] * 2,
        "summarize_run": [("COMPLETED", 1)] * 2,
        "compare_runs": [("COMPLETED", 1)],
        "replay_runs": [("COMPLETED", 1)],
    }
    assert output(run).count("Shell command: srun --mpi=pmi2 -n 2 ") == 2


def test_results_equal_those_of_a_local_run(on_srun, tiny_pipeline):
    results, _ = on_srun
    for run in RUNS:
        assert_same_run(results, tiny_pipeline, run)
    for name in ["summary.csv", "speedup.csv"]:
        assert shape(results / name) == shape(tiny_pipeline / name), name
    assert_same_parameters(results, tiny_pipeline)


def test_mpiexec_inside_the_allocation_is_one_profile_key_away(tmp_path, tiny_pipeline):
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    profile["set-resources"]["train"]["mpi"] = ".venv-train/bin/mpiexec"
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "config.yaml").write_text(yaml.safe_dump(profile))
    results = tmp_path / "results"
    target = results / "runs" / STATIC / "train" / "model.params"
    run = on_slurm(results, target, profile=tmp_path / "profile")
    assert run.returncode == 0, output(run)[-3000:]
    assert "Shell command: .venv-train/bin/mpiexec -n 2 " in output(run)
    assert sbatch_jobs(run)["train"] == [("COMPLETED", 2)]
    assert_same_run(results, tiny_pipeline, STATIC)
    assert_same_parameters(results, tiny_pipeline)


def test_a_failing_job_fails_within_a_minute_naming_its_slurm_log(tmp_path):
    results = tmp_path / "results"
    bad = {"datasets": {"digits": {"source": "idx", "path": "/nonexistent/idx"}}}
    # The staging job alone: after a failure snakemake waits for the jobs still running.
    run = on_slurm(results, results / "data" / "digits", override=bad, timeout=60)
    assert run.returncode != 0
    assert "Error in rule stage_dataset" in output(run)
    logs = tmp_path / "slurm-logs" / "rule_stage_dataset" / "digits"
    named = re.search(re.escape(str(logs)) + r"/\d+\.log", output(run))
    assert named, f"no SLURM log under {logs} named in:\n{output(run)[-3000:]}"
    assert "Error in rule stage_dataset" in Path(named.group()).read_text()
    stage_log = (results / "logs" / "stage" / "digits.log").read_text()
    assert "/nonexistent/idx: not a directory" in stage_log
