"""This process's place in a job as the MPI launcher, SLURM or torchrun tells it, read from the
environment without initialising MPI: for what must happen before MPI starts (a one-line error
from rank 0 only; the threads and cores of a rank set before MXNet loads)."""

import os

# MPI launchers, SLURM, then torchrun's.
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK")
SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "WORLD_SIZE")
LOCAL_RANK_VARIABLES = (
    "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "LOCAL_RANK",
)
LOCAL_SIZE_VARIABLES = (
    "MPI_LOCALNRANKS",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_NTASKS_PER_NODE",
    "LOCAL_WORLD_SIZE",
)


def _first(variables, default):
    for variable in variables:
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable])
    return default


def launcher_rank():
    """This process's rank; 0 outside a launcher."""
    return _first(RANK_VARIABLES, 0)


def launcher_size():
    """The number of ranks of the job; 1 outside a launcher."""
    return _first(SIZE_VARIABLES, 1)


def local_rank():
    """This process's number among the job's ranks on its node (the GPU a rank takes, as
    Horovod's `hvd.local_rank()`); 0 outside a launcher."""
    return _first(LOCAL_RANK_VARIABLES, 0)


def local_size():
    """The number of the job's ranks on this node; 1 outside a launcher."""
    return _first(LOCAL_SIZE_VARIABLES, 1)
