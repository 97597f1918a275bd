"""`dynalloc train`: one MPI rank of a training run (`mpiexec -n R dynalloc train ...`).

Rank 0 writes the run directory: config.yaml (the resolved config), iterations.csv, epochs.csv,
metrics.json, train.log and model.params (`runtime.recorder`). Everything that can be wrong with
the input is found before the directory is touched, and all ranks agree on it, so no rank waits
in a collective for a rank that already gave up.

A run config with `script:` trains with the user's own script instead: each rank becomes
`python SCRIPT SCRIPT_ARGS...` (same launcher, same ranks), with the run config's path in
DYNALLOC_CONFIG and the run directory in DYNALLOC_RUN_DIR, which `Recorder.from_environment()`
reads.
"""

import os
import sys

from dynalloc.experiment.run_config import load_config, resolve
from dynalloc.launcher import launcher_rank, launcher_size
from dynalloc.runtime.contention import pin_rank
from dynalloc.runtime.runlock import RunLock

CONFIG_VARIABLE, RUN_DIR_VARIABLE = "DYNALLOC_CONFIG", "DYNALLOC_RUN_DIR"  # runtime.recorder's


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML)")
    parser.add_argument("--out", required=True, help="run directory to write")


def run(args):
    # Compute threads and cores of this rank, set before MXNet loads; from the config, not the
    # environment, since launchers export their own (Snakemake sets OMP_NUM_THREADS to the job's
    # threads, which would make ranks sharing cores thrash). A script inherits both.
    config = resolve(load_config(args.config), launcher_size())
    RunLock(args.out).check()  # a second training on the directory is refused before MXNet loads
    for variable in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        os.environ[variable] = str(config["threads_per_rank"])
    pin_rank(config, launcher_rank())
    if config["script"]:
        os.environ[CONFIG_VARIABLE] = os.path.abspath(args.config)
        os.environ[RUN_DIR_VARIABLE] = os.path.abspath(args.out)
        script = [config["script"], *config["script_args"]]
        os.execv(sys.executable, [sys.executable, *script])
    from dynalloc.runtime.faults import agree
    from dynalloc.runtime.recorder import Recorder

    run = Recorder(args.config, args.out)  # the framework's backend: MXNet's or PyTorch's
    built = agree(run.comm, lambda: run.backend.build(run.setup))
    with run:
        run.backend.train(run, *built)
    return 0
