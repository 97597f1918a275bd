"""Faults on real MPI ranks: a lost rank, a raising rank, SIGTERM, a full or read-only disk.
Nothing may hang, and the last checkpoint must survive."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.peerwatch import alive
from helpers import dynalloc, rank_pids, start_dynalloc, wait_for
from test_resume import ITERATIONS, assert_logged_once, checkpointed, write_config

pytestmark = pytest.mark.mpi

FAILING_RANK = Path(__file__).with_name("failing_rank.py")


def start(digits, tmp_path, out, ranks=2, **overrides):
    config = write_config(tmp_path, "run", dataset=str(digits), **overrides)
    return config, start_dynalloc("train", "--config", config, "--out", out, ranks=ranks)


def ended_within(job, seconds):
    """(returncode, stderr) of a job that must end within `seconds`."""
    try:
        _, stderr = job.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise AssertionError(f"the job still ran {seconds} s later: it hangs") from None
    return job.returncode, stderr


def newest_is_intact(out):
    newest = checkpoint.existing(out)[0]
    assert checkpoint.read(newest)["iteration"] >= 10
    return newest


@pytest.mark.parametrize(
    ("ranks", "victim", "launcher_options"), [(2, 0, []), (3, 1, ["-disable-auto-cleanup"])]
)
def test_killed_rank_ends_every_rank_with_a_line_naming_it(
    digits, tmp_path, ranks, victim, launcher_options
):
    """Hydra SIGKILLs the survivors within milliseconds of a rank killed by a signal, with or
    without -disable-auto-cleanup; the survivors' watch processes outlive them and name it."""
    out = tmp_path / "run"
    config = write_config(
        tmp_path, "run", dataset=str(digits), scenario={"slowdown": [1, 8, 2][:ranks]}
    )
    job = start_dynalloc(
        "train", "--config", config, "--out", out, ranks=ranks, launcher_options=launcher_options
    )
    wait_for(lambda: checkpointed(out, 10), what="a checkpoint")
    pids = rank_pids(out)
    os.kill(pids[victim], signal.SIGKILL)
    code, stderr = ended_within(job, 30)
    assert code != 0, stderr
    assert f"rank {victim} (pid {pids[victim]}) was lost" in stderr, stderr
    assert not any(alive(pid) for pid in pids.values())
    newest_is_intact(out)


def test_raising_rank_aborts_the_job_with_its_message(digits, tmp_path):
    config = write_config(tmp_path, "run", dataset=str(digits))
    job = start_dynalloc(
        "train", "--config", config, "--out", tmp_path / "run", ranks=2,
        python_script=FAILING_RANK, env={"FAIL_RANK": "1", "FAIL_AT": "15"},
    )  # fmt: skip
    code, stderr = ended_within(job, 30)
    assert code != 0, stderr
    assert "rank 1: RuntimeError: injected failure at iteration 15" in stderr, stderr
    assert "was lost" not in stderr, stderr  # the peers' watches stood down before the abort
    newest_is_intact(tmp_path / "run")


@pytest.mark.parametrize("target", ["launcher", "rank 1"])
def test_sigterm_checkpoints_exits_75_and_the_rerun_resumes(digits, tmp_path, target):
    out = tmp_path / "run"
    config, job = start(digits, tmp_path, out)
    wait_for(lambda: checkpointed(out, 10), what="a checkpoint")
    os.kill(job.pid if target == "launcher" else rank_pids(out)[1], signal.SIGTERM)
    code, stderr = ended_within(job, 30)
    assert code == 75, stderr
    line = next(line for line in stderr.splitlines() if "stopped by" in line)
    stopped_at = int(line.split("after iteration ")[1].split(";")[0])
    assert 10 <= stopped_at < ITERATIONS
    assert checkpoint.existing(out)[0] == checkpoint.checkpoint_path(out, stopped_at)
    rerun = dynalloc("train", "--config", config, "--out", out, ranks=2)
    assert rerun.returncode == 0, rerun.stderr
    assert f"iteration-{stopped_at:08d}.ckpt (iteration {stopped_at})" in rerun.stderr
    assert_logged_once(out, 2)


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs: a disk that can really fill up (root mounts it; CI runs as root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", disk)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def mount(*args):
    done = subprocess.run(["mount", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"mount {' '.join(map(str, args))} failed (needs root): {done.stderr}")


def fill(directory):
    with open(directory / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass


@pytest.mark.parametrize("fault", ["disk full", "read-only"])
def test_full_or_read_only_disk_is_one_clear_error_and_keeps_the_checkpoint(
    digits, tmp_path, small_disk, fault
):
    out = small_disk / "run"
    config, job = start(digits, tmp_path, out)
    wait_for(lambda: checkpointed(out, 10), what="a checkpoint")
    if fault == "disk full":
        fill(small_disk)
    else:  # a read-only view of the run directory: files already open stay writable
        mount("--bind", out, out)
        mount("-o", "remount,bind,ro", out)
    began = time.monotonic()
    code, stderr = ended_within(job, 30)
    print(f"{fault}: the job ended {time.monotonic() - began:.1f} s later")
    reason = "No space left on device" if fault == "disk full" else "Read-only file system"
    errors = [line for line in stderr.splitlines() if "error: rank 0: cannot write" in line]
    assert code != 0 and errors and reason in errors[0], stderr
    assert str(out) in errors[0]
    newest = newest_is_intact(out)
    if fault == "disk full":
        (small_disk / "filler").unlink()
    else:
        subprocess.run(["umount", str(out)], check=True)
    rerun = dynalloc("train", "--config", config, "--out", out, ranks=2)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming from {newest}" in rerun.stderr
    assert_logged_once(out, 2)
