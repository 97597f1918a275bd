"""The pipeline's job supervisor (runtime/common/job.py) on real processes: retries only after a
stop or a stall, the training stopped with snakemake or with the supervisor itself, a stall
ended."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from dynalloc.runtime.common.job import SNAKEMAKE_VARIABLE, STALL_GRACE_S
from helpers import wait_for

# A launcher stand-in: sets up its signals as argv[2] says, marks that it runs (a test may stop it
# from then on: a SIGTERM before its handler would end it unheard), then behaves as argv[2] says.
LAUNCHER = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    how = sys.argv[2]
    if how == "checkpoint-on-sigterm":
        def stop(number, frame):
            print("checkpoint written", flush=True)
            sys.exit(75)
        signal.signal(signal.SIGTERM, stop)
    if how == "stall":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as srun waiting for a cut-off node
    Path(sys.argv[1]).write_text(str(os.getpid()))
    if how.startswith("exit"):
        print("the last words of a failed training", flush=True)
        sys.exit(int(how[4:]))
    if how == "stall":
        from dynalloc.runtime.common.job import report_stall
        report_stall()
    time.sleep(60)
    """
)


def start(tmp_path, attempt, how, env=None):
    """The supervisor of `attempt` with its output in the job's log, as the train rule runs it."""
    log, marker = tmp_path / "train.log", tmp_path / f"ran-{attempt}"
    command = [sys.executable, "-m", "dynalloc.runtime.common.job", "--attempt", str(attempt)]
    command += ["--status", str(tmp_path / "train.status"), "--"]
    command += [sys.executable, "-c", LAUNCHER, str(marker), how]
    with open(log, "w") as output:
        job = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    return job, log, marker


def finish(tmp_path, attempt, how, timeout=30):
    job, log, marker = start(tmp_path, attempt, how)
    return job.wait(timeout), log.read_text(), marker.exists()


def test_after_a_failure_a_rerun_does_not_cure_the_retry_ends_at_once_showing_its_log(tmp_path):
    code, _, ran = finish(tmp_path, 1, "exit3")
    assert (code, ran) == (3, True)
    began = time.monotonic()
    code, log, ran = finish(tmp_path, 2, "exit0")
    assert (code, ran) == (3, False) and time.monotonic() - began < 5
    assert "attempt 2 not started: attempt 1 ended with exit code 3" in log, log
    assert "the last words of a failed training" in log, log
    code, _, ran = finish(tmp_path, 3, "exit0")  # and so does every later attempt
    assert (code, ran) == (3, False)


@pytest.mark.parametrize("code", [75, 69])
def test_a_stop_or_a_stall_is_retried(tmp_path, code):
    assert finish(tmp_path, 1, f"exit{code}")[:2] == (code, "the last words of a failed training\n")
    assert json.loads((tmp_path / "train.status").read_text())["code"] == code
    assert finish(tmp_path, 2, "exit0")[0::2] == (0, True)


def test_a_first_attempt_always_runs_and_forgets_the_previous_run(tmp_path):
    assert finish(tmp_path, 1, "exit3")[0] == 3
    assert finish(tmp_path, 1, "exit0")[0::2] == (0, True)
    assert not (tmp_path / "train.status").exists()
    assert finish(tmp_path, 2, "exit0")[0::2] == (0, True)  # no record: killed, so retried


def test_the_training_stops_when_the_snakemake_that_started_it_dies(tmp_path):
    snakemake = subprocess.Popen(["sleep", "60"])
    variable = {SNAKEMAKE_VARIABLE: f"{snakemake.pid}@{socket.gethostname()}"}
    job, log, marker = start(tmp_path, 1, "checkpoint-on-sigterm", env=variable)
    wait_for(marker.exists, timeout=20, what="the launcher")
    snakemake.kill()
    snakemake.wait()
    assert job.wait(10) == 75
    text = log.read_text()
    assert "the snakemake that started this job ended: stopping the training" in text, text
    assert "checkpoint written" in text, text


def test_snakemake_on_another_host_is_not_watched(tmp_path):
    variable = {SNAKEMAKE_VARIABLE: "1@another-host"}  # pid 1 runs for ever here
    job, _, _ = start(tmp_path, 1, "exit0", env=variable)
    assert job.wait(20) == 0


def test_a_supervisor_killed_outright_still_stops_the_launcher(tmp_path):
    job, log, marker = start(tmp_path, 1, "checkpoint-on-sigterm")
    wait_for(marker.exists, timeout=20, what="the launcher")
    job.kill()
    job.wait()
    wait_for(lambda: "checkpoint written" in log.read_text(), timeout=10, what="the checkpoint")


def test_a_time_limit_that_ends_the_launcher_by_its_signal_counts_as_a_stop(tmp_path):
    job, _, marker = start(tmp_path, 1, "sleep")  # SIGTERM ends it: srun at a time limit
    wait_for(marker.exists, timeout=20, what="the launcher")
    job.send_signal(signal.SIGTERM)
    assert job.wait(10) == 75
    assert finish(tmp_path, 2, "exit0")[0] == 0


def test_a_stall_ends_a_launcher_that_would_wait_for_ever(tmp_path):
    job, log, marker = start(tmp_path, 1, "stall")
    began = time.monotonic()
    assert job.wait(STALL_GRACE_S + 15) == 69, log.read_text()
    assert STALL_GRACE_S <= time.monotonic() - began < STALL_GRACE_S + 10
    assert json.loads((tmp_path / "train.status").read_text())["code"] == 69


def test_an_elastic_run_whose_output_goes_to_no_file_is_refused_in_one_line(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("dataset: d\nelastic: {max_restarts: 1}\n")
    command = [sys.executable, "-m", "dynalloc.runtime.common.job", "--", "mpiexec", "-n", "2"]
    command += ["dynalloc", "train", "--config", str(config), "--out", str(tmp_path / "run")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr == (
        "dynalloc job: error: an elastic run's output must go to a file (add > train.log 2>&1): "
        "the restarts read from it which ranks a launch lost\n"
    )
