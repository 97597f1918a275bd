"""`dynalloc train`: one MPI rank of a training run (`mpiexec -n R dynalloc train ...`).

Rank 0 writes the run directory: config.yaml (the resolved config), iterations.csv, epochs.csv,
metrics.json, train.log and model.params. Everything that can be wrong with the input is found
before the directory is touched, and all ranks agree on it, so no rank waits in a collective for
a rank that already gave up. The loop itself is `dynalloc.runtime.loop`.
"""

import logging
import os
import sys
from pathlib import Path

from dynalloc import rundir
from dynalloc.errors import DynallocError, SharedError
from dynalloc.runtime import checkpoint
from dynalloc.runtime.contention import pin_rank
from dynalloc.runtime.faults import EXIT_STOPPED, Stopped, StopRequest, abort, identity
from dynalloc.runtime.peerwatch import PeerWatch
from dynalloc.runtime.prepare import build, prepare

log = logging.getLogger(__name__)


def add_arguments(parser):
    parser.add_argument("--config", required=True, help="run config (YAML)")
    parser.add_argument("--out", required=True, help="run directory to write")


def run(args):
    from mpi4py import MPI

    from dynalloc.runtime.loop import TrainingLoop

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    setup = agree(comm, lambda: prepare(args.config, rank, ranks))
    config = setup.config
    # Compute threads per rank, set before MXNet loads; from the config, not the environment,
    # since launchers export their own (Snakemake sets OMP_NUM_THREADS to the job's threads,
    # which would make ranks sharing cores thrash).
    for variable in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        os.environ[variable] = str(config["threads_per_rank"])
    core = pin_rank(config, rank)
    parts = agree(comm, lambda: build(setup))
    out = Path(args.out)
    opened = agree(comm, lambda: open_run_dir(out, config) if rank == 0 else None)
    resume, notes = comm.bcast(opened, root=0) or (None, [])
    identities = comm.allgather(identity())
    with StopRequest() as stop, PeerWatch(rank, identities) as watch:
        watch.meet(comm.allgather(watch.pid))
        runner = None
        try:
            runner = TrainingLoop(comm, setup, parts, out, core, resume, notes)
            runner.open_books(identities)
            runner.train(stop)
        except Stopped as stopped:
            watch.disarm()
            comm.Barrier()
            if rank == 0:
                log.info("%s", stopped)
                sys.stderr.write(f"dynalloc train: {stopped}\n")
            return EXIT_STOPPED
        except SharedError:
            watch.disarm()
            comm.Barrier()
            raise
        except BaseException as error:  # noqa: BLE001 - any failure must end every rank
            watch.disarm_host()
            abort(comm, rank, error, log if runner and runner.books else None)
        watch.disarm()  # peers that exit after the barrier are done, not lost
        comm.Barrier()
        runner.finish()
    return 0


def agree(comm, setup):
    """Run `setup` on every rank; if it fails on any, every rank raises that rank's error."""
    try:
        result, message = setup(), None
    except DynallocError as error:
        result, message = None, str(error)
    messages = [m for m in comm.allgather(message) if m]
    if messages:
        raise DynallocError(messages[0])
    return result


def open_run_dir(out, config):
    """Create the run directory, or find the checkpoint to resume it from.

    Returns (resume, notes): the newest usable checkpoint's payload (None for a fresh start) and
    what rank 0 should log about the choice. A checkpoint of the same run that already finished
    is resumed too (it only rewrites the final files); one of a finished run with another config
    is set aside (the pipeline reruns a run whose config changed), and an unfinished one of
    another run is refused, naming the key that differs.
    """
    notes = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        found = checkpoint.newest_valid(out, notes.append)
    except OSError as error:
        raise DynallocError(f"cannot create run directory {out}: {error.strerror}") from None
    if found and found[1]["complete"] and found[1]["config"] != config:
        notes.append(f"{out} holds a finished run of another config: starting afresh")
        checkpoint.remove_all(out)
        found = None
    if found:
        checkpoint.check_resumable(found[0], found[1]["config"], config)
        notes.append(f"resuming from {found[0]} (iteration {found[1]['iteration']})")
    rundir.prepare(out, config, resuming=bool(found))
    return (found[1] if found else None), notes
