"""`dynalloc train`: one MPI rank of a training run (`mpiexec -n R dynalloc train ...`).

Rank 0 writes the run directory: config.yaml (the resolved config), iterations.csv, epochs.csv,
metrics.json, train.log and model.params (`runtime.common.recorder`). Everything that can be
wrong with the input is found before the directory is touched, and all ranks agree on it, so no
rank waits in a collective for a rank that already gave up.

A run config with `script:` trains with the user's own script instead (`runtime.common.script_run`).
"""

import os

from dynalloc.experiment.run_config import load_config, resolve
from dynalloc.launcher import launcher_rank, launcher_size
from dynalloc.runtime.common.placement import pin_rank
from dynalloc.runtime.common.prepare import group_config
from dynalloc.runtime.common.runlock import RunLock
from dynalloc.runtime.common.script_run import exec_script


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML)")
    parser.add_argument("--out", required=True, help="run directory to write")


def run(args):
    # Compute threads and cores of this rank, set before MPI and MXNet load; from the config,
    # not the environment, since launchers export their own (Snakemake sets OMP_NUM_THREADS to
    # the job's threads, which would make ranks sharing cores thrash). A script inherits both.
    config = resolve(group_config(load_config(args.config), launcher_size()), launcher_size())
    for variable in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        os.environ[variable] = str(config["threads_per_rank"])
    pin_rank(config, launcher_rank())
    if config["script"]:  # its Recorder refuses a second training, agreed through its backend
        exec_script(config, args.config, args.out)
    refuse_a_second_training(args.out, config["framework"])
    from dynalloc.runtime.common.faults import agree
    from dynalloc.runtime.common.recorder import Recorder

    run = Recorder(args.config, args.out)  # the framework's backend: MXNet's or PyTorch's
    built = agree(run.comm, lambda: run.backend.build(run.setup))
    with run:
        run.backend.train(run, *built)
    return 0


def refuse_a_second_training(out, framework):
    """Every rank checks the run directory's lock before the framework loads, so that a second
    training is refused at once. An MXNet run's ranks agree on the answer through MPI: ranks
    that checked a moment apart as the holder ended would disagree, and mpiexec does not end
    the ranks left when one exits before MPI starts, so they would wait in their first
    collective forever. A PyTorch run's launcher ends them (torchrun), or their rendezvous
    times out."""
    lock = RunLock(out)
    if framework != "mxnet":
        lock.check()
        return
    from mpi4py import MPI  # MPI alone, not MXNet: the refusal stays quick

    from dynalloc.runtime.common.faults import agree

    agree(MPI.COMM_WORLD, lock.check)
