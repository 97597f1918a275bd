"""Test helpers: real processes under the venv's own mpiexec."""

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}


def dynalloc(*args, ranks=None, timeout=300):
    """Run the `dynalloc` command, under `mpiexec -n ranks` when ranks is given."""
    command = [str(BIN / "dynalloc"), *map(str, args)]
    if ranks is not None:
        command = [str(BIN / "mpiexec"), "-n", str(ranks), *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)


def mpi_python(ranks, script, *args, timeout=120):
    """Run a Python script on `ranks` real MPI ranks."""
    command = [str(BIN / "mpiexec"), "-n", str(ranks), sys.executable, str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ENV)
