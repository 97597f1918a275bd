"""Launching the PyTorch tests' ranks for real: torchrun (the ecosystem's launcher) and mpiexec."""

import os
import subprocess
import sys
from pathlib import Path

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
