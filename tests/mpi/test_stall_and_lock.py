"""A rank that stops without dying, and a second training on a run directory, on real MPI ranks:
the stall ends the job naming the rank and the rerun resumes; the second training is refused at
once and touches nothing."""

import contextlib
import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest
from dynalloc.runtime.common.peerwatch import alive
from helpers import dynalloc, mpi_python, rank_pids, start_dynalloc, wait_for
from test_resume import assert_logged_once, checkpointed, write_config

pytestmark = pytest.mark.mpi
STALL_RACE = Path(__file__).with_name("stall_race.py")


def test_a_stopped_rank_ends_the_job_naming_it_and_the_rerun_resumes(digits, tmp_path):
    out = tmp_path / "run"
    config = write_config(
        tmp_path, "run", dataset=str(digits), scenario={"slowdown": [1, 8, 2]}, stall_timeout=3
    )
    job = start_dynalloc("train", "--config", config, "--out", out, ranks=3)
    wait_for(lambda: checkpointed(out, 10), what="a checkpoint")
    pids = rank_pids(out)
    os.kill(pids[1], signal.SIGSTOP)  # alive, but answers nobody: a hung driver, a frozen node
    began = time.monotonic()
    try:
        _, stderr = job.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # hydra kills it with the others
            os.kill(pids[1], signal.SIGKILL)
    ended = time.monotonic() - began
    print(f"a stopped rank: the job ended {ended:.1f} s later")
    # Every rank that answers exits 69; hydra may report instead the SIGKILL it sends the
    # stopped rank once the others ended (seen once in four loaded CI runs)
    assert job.returncode in (69, 9), stderr
    lines = [line for line in stderr.splitlines() if "stopped answering" in line]
    assert len(lines) == 1, stderr
    assert f"rank 1 (pid {pids[1]} on {socket.gethostname()}) stopped answering" in lines[0]
    assert "rank 2" not in lines[0] and "was lost" not in stderr, stderr
    assert ended < 30
    wait_for(lambda: not any(alive(pid) for pid in pids.values()), timeout=10, what="the ranks")
    rerun = dynalloc("train", "--config", config, "--out", out, ranks=3)
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from" in rerun.stderr
    assert_logged_once(out, 3)


def snapshot(folder):
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in folder.rglob("*")
    }


def test_a_second_training_on_the_directory_is_refused_at_once_touching_nothing(digits, tmp_path):
    out = tmp_path / "run"
    config = write_config(tmp_path, "run", dataset=str(digits))
    first = start_dynalloc("train", "--config", config, "--out", out, ranks=2)
    wait_for(lambda: checkpointed(out, 10), what="a checkpoint")
    pids = rank_pids(out)
    for pid in pids.values():  # hold the first still, so that nothing it writes hides a change
        os.kill(pid, signal.SIGSTOP)
    try:
        before = snapshot(out)
        began = time.monotonic()
        second = dynalloc("train", "--config", config, "--out", out, ranks=2)
        refused_in = time.monotonic() - began
        after = snapshot(out)
    finally:
        for pid in pids.values():
            os.kill(pid, signal.SIGCONT)
    print(f"a second training refused in {refused_in:.2f} s")
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert lines == [
        f"dynalloc train: error: {out} is in use by another training (host "
        f"{socket.gethostname()}, pid {pids[0]}); wait for it to end or stop it (SIGTERM "
        "checkpoints it), then run again"
    ], second.stderr
    assert after == before
    assert refused_in < 5  # before MXNet is imported
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert_logged_once(out, 2)


def test_the_lowest_rank_writes_the_line_though_a_peer_stalled_first():
    job = mpi_python(3, STALL_RACE, timeout=60)
    assert job.returncode in (69, 9), job.stderr
    lines = [line for line in job.stderr.splitlines() if "stopped answering" in line]
    assert len(lines) == 1, job.stderr
    assert lines[0].startswith("dynalloc train: error: rank 0: ") and "rank 1 (pid" in lines[0]
    bound = float(re.search(r"\(stall bound ([0-9.]+) s\)", lines[0]).group(1))
    assert bound < 5  # the bound that passed, on rank 2, not rank 0's own 15 s
