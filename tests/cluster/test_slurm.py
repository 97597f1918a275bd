"""The pipeline through workflow/profiles/slurm on a real SLURM cluster (conftest.py): every job
an sbatch job, training an MPI job of 2 tasks, results equal to a local run's."""

import re
from pathlib import Path

import pytest
from slurmrun import max_difference, on_slurm, output, profile_with, sbatch_jobs, shape

STATIC = "digits-mlp-static-slowdown-1-3-r2-s0"
RUNS = [STATIC, "digits-mlp-adaptive-slowdown-1-3-r2-s0"]
ONE_TASK = ["stage_dataset", "run_config", "summarize_run", "compare_runs", "replay_runs"]

pytestmark = [pytest.mark.mpi, pytest.mark.cluster, pytest.mark.usefixtures("slurm")]


def assert_same_run(results, reference, run):
    for name in ["iterations.csv", "epochs.csv"]:
        got, want = (r / "runs" / run / "train" / name for r in (results, reference))
        assert shape(got) == shape(want), f"{run}/{name}"


def assert_same_parameters(results, reference):
    difference = max_difference(*(r / "runs" / STATIC / "train" for r in (results, reference)))
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
    jobs = {rule: sorted(states) for rule, states in sbatch_jobs(output(run)).items()}
    assert {rule: jobs[rule] for rule in ONE_TASK} == {
        "stage_dataset": [("COMPLETED", 1)],
        "run_config": [("COMPLETED", 1)] * 2,
        "summarize_run": [("COMPLETED", 1)] * 2,
        "compare_runs": [("COMPLETED", 1)],
        "replay_runs": [("COMPLETED", 1)],
    }
    assert jobs["train"] == [("COMPLETED", 2)] * 2
    assert all(state == "COMPLETED" for states in jobs.values() for state, _ in states), jobs
    assert output(run).count(" -- srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 ") == 2  # supervised


def test_results_equal_those_of_a_local_run(on_srun, tiny_pipeline):
    results, _ = on_srun
    for run in RUNS:
        assert_same_run(results, tiny_pipeline, run)
    for name in ["summary.csv", "speedup.csv"]:
        assert shape(results / name) == shape(tiny_pipeline / name), name
    assert_same_parameters(results, tiny_pipeline)


def test_mpiexec_inside_the_allocation_is_one_profile_key_away(tmp_path, tiny_pipeline):
    profile = profile_with(tmp_path, mpi=".venv-train/bin/mpiexec")
    results = tmp_path / "results"
    target = results / "runs" / STATIC / "train" / "model.params"
    run = on_slurm(results, target, profile=profile)
    assert run.returncode == 0, output(run)[-3000:]
    assert " -- .venv-train/bin/mpiexec -n 2 " in output(run)
    assert sbatch_jobs(output(run))["train"] == [("COMPLETED", 2)]
    assert_same_run(results, tiny_pipeline, STATIC)
    assert_same_parameters(results, tiny_pipeline)


def test_a_failing_job_fails_the_run_naming_its_slurm_log(tmp_path):
    results = tmp_path / "results"
    empty = tmp_path / "no-idx-files"  # exists, so the DAG is built; staging finds no IDX file
    empty.mkdir()
    bad = {"datasets": {"digits": {"source": "idx", "path": str(empty)}}}
    # The staging job alone: after a failure snakemake waits for the jobs still running. 45 s
    # here idle; the plugin's polling backs off by 10 s a check while a job runs, and waits out
    # its last interval on exit, so a loaded machine's slower job can double that.
    run = on_slurm(results, results / "data" / "digits", override=bad, timeout=180)
    assert run.returncode != 0
    assert "Error in rule stage_dataset" in output(run)
    logs = tmp_path / "slurm-logs" / "rule_stage_dataset" / "digits"
    named = re.search(re.escape(str(logs)) + r"/\d+\.log", output(run))
    assert named, f"no SLURM log under {logs} named in:\n{output(run)[-3000:]}"
    assert "Error in rule stage_dataset" in Path(named.group()).read_text()
    stage_log = results / "logs" / "stage" / "digits.log"
    missing = f"{empty}/train-images-idx3-ubyte: missing"
    assert missing in stage_log.read_text()
    shown = output(run).split(f"Logfile {stage_log}:")  # show-failed-logs: in the terminal
    assert len(shown) == 2 and missing in shown[1], output(run)
