"""Test helpers: real processes under the venv's own mpiexec, real snakemake runs."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}
SNAKEMAKE = ROOT / ".venv-workflow" / "bin" / "snakemake"
TINY = ROOT / "tests" / "workflow" / "tiny.yaml"


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


def snakemake(*args, results=None, configfile=TINY, override=None, timeout=600):
    """Snakemake from the repository root; `override` (a dict) is merged over `configfile`."""
    command = [str(SNAKEMAKE), "--cores", "2"]
    if configfile is not None:
        command += ["--configfile", str(configfile)]
        if override is not None:
            extra = Path(results).parent / "override.yaml"
            extra.write_text(yaml.safe_dump(override))
            command.append(str(extra))
    if results is not None:
        command += ["--config", f"results={results}"]  # a top-level --config override
    return subprocess.run(
        [*command, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def parameters(run_dir):
    """A run's final parameters, {name: numpy array}, from its model.params."""
    import mxnet as mx  # the training env only: the analysis tests import this module too

    return {k: v.asnumpy() for k, v in mx.nd.load(str(run_dir / "model.params")).items()}

