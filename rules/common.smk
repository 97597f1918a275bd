# Helpers shared by the rules: the expanded grid, paths, and the two environments' commands.
import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from dynalloc.errors import DynallocError
from dynalloc.experiment.grid import expand_runs, stage_arguments
from dynalloc.runtime.common.job import announce_snakemake

RESULTS = config["results"]
# A `models` factory's module is imported from the directory of each config file (and from
# `python_path`); absolute, since the ranks may start elsewhere.
CONFIG_DIRS = [str(Path(f).resolve().parent) for f in workflow.configfiles]
try:
    RUNS = expand_runs(config, CONFIG_DIRS)
except DynallocError as error:
    raise WorkflowError(f"config: {error}") from None

# Staging and training run in the training environment (MXNet, numpy 1.23); its interpreter
# comes from the config so that a cluster user can point at a conda env or a module.
TRAIN_PYTHON = Path(config["train_python"]).expanduser()
if not (TRAIN_PYTHON.is_file() and os.access(TRAIN_PYTHON, os.X_OK)):
    raise WorkflowError(
        f"config: train_python {TRAIN_PYTHON} is not an executable interpreter; "
        "run `make setup` or point train_python at the training environment's python"
    )
TRAIN_DYNALLOC = f"{shlex.quote(str(TRAIN_PYTHON))} -m dynalloc.cli"
# Runs of `framework: torch` train in the PyTorch environment (`make setup-torch`).
TORCH_PYTHON = Path(config.get("torch_python", ".venv-torch/bin/python")).expanduser()
if any(run["config"].get("framework") == "torch" for run in RUNS.values()) and not (
    TORCH_PYTHON.is_file() and os.access(TORCH_PYTHON, os.X_OK)
):
    raise WorkflowError(
        f"config: torch_python {TORCH_PYTHON} is not an executable interpreter, and "
        "training.framework is torch; run `make setup-torch` or point torch_python at the "
        "PyTorch environment's python"
    )
TORCH_DYNALLOC = f"{shlex.quote(str(TORCH_PYTHON))} -m dynalloc.cli"
# Whom a training job must not outlive (runtime/common/job.py): this snakemake. Inside a SLURM
# job the Snakefile is read again by the job's own snakemake, which then announces itself.
announce_snakemake()
# Attempts after the first of a training run, which runtime/common/job.py lets start only after a
# stop or a stall: a run stopped at a time limit three times in a row needs a longer runtime.
TRAIN_RETRIES = 3
# The runs of one rank, which train_one_rank trains without MPI (a regular expression).
ONE_RANK_RUNS = (
    "|".join(re.escape(n) for n, run in RUNS.items() if run["ranks"] == 1) or "(?!)"
)
# Analysis runs in this (the workflow) environment.
WORKFLOW_DYNALLOC = f"{shlex.quote(sys.executable)} -m dynalloc.cli"


def run_dir(run):
    return f"{RESULTS}/runs/{run}"


def run_json(wildcards):
    return json.dumps(RUNS[wildcards.run]["config"], sort_keys=True)


def launch_command(wildcards, resources):
    """R MPI ranks through the profile's launcher (`mpi`), one rank without it, or for
    a `dist_sync` run `dynalloc baseline`, which starts MXNet's parameter server."""
    run = RUNS[wildcards.run]
    if run["command"] == "baseline":
        return f"{TRAIN_DYNALLOC} baseline --workers {run['ranks']}"
    torch = run["config"].get("framework") == "torch"
    dynalloc = TORCH_DYNALLOC if torch else TRAIN_DYNALLOC
    if run["ranks"] == 1:
        return f"{dynalloc} train"
    return f"{resources.mpi} -n {run['ranks']} {dynalloc} train"


def warm_source(wildcards):
    """The run whose costs a run starts from (`warm_start: {policy: P}`), trained before it."""
    source = RUNS[wildcards.run].get("warm_from")
    return [f"{run_dir(source)}/train/iterations.csv"] if source else []


def run_priority(wildcards):
    return RUNS[wildcards.run]["priority"]


def run_ranks(wildcards):
    return RUNS[wildcards.run]["ranks"]


def staged(wildcards):
    return f"{RESULTS}/data/{RUNS[wildcards.run]['dataset']}"


# The report's figures (written by compare_runs) and the report category of each.
PLOTS = {
    "shares": "Allocation",
    "timing": "Allocation",
    "convergence": "Training",
    "throughput": "Throughput",
}


def final_outputs():
    return [
        f"{RESULTS}/summary.csv",
        f"{RESULTS}/speedup.csv",
        f"{RESULTS}/replay.csv",
    ] + [f"{RESULTS}/plots/{name}.png" for name in PLOTS]
