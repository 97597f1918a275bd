"""`dynalloc torchrun [torchrun's options] dynalloc train --config C --out DIR`: torchrun itself
(`torch.distributed.run`, in this process, with its options and elastic agent unchanged), with
dynalloc's exit codes.

A run config that cannot run is refused before any worker starts, in one line and exit 2, for
the largest group the `--nnodes MIN:MAX` range allows; and a worker that refused its input (exit
2, after its one line) ends the launch with exit 2, as under mpiexec. torchrun alone retries such
a worker up to --max-restarts times and exits 1 with a page of ChildFailedError: the pipeline's
retries, a scheduler's and a person all read 1 as a fault worth a rerun.
"""

import argparse

from dynalloc.experiment.run_config import load_config, resolve


def add_arguments(parser):
    parser.add_argument(
        "passed_on", nargs=argparse.REMAINDER, help="torchrun's options, the program and its own"
    )


def run(args):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, parse_min_max_nnodes
    from torch.distributed.run import run as torchrun

    options = get_args_parser().parse_args(args.passed_on)
    try:
        _, most_nodes = parse_min_max_nnodes(options.nnodes)
        most = most_nodes * int(options.nproc_per_node)
    except (RuntimeError, ValueError):
        most = None  # "gpu", "auto": each worker checks its group
    program = options.training_script_args
    if most is not None and "--config" in program[:-1]:
        resolve(load_config(program[program.index("--config") + 1]), most)
    try:
        torchrun(options)
    except ChildFailedError as error:
        if any(failure.exitcode == 2 for failure in error.failures.values()):
            return 2  # a worker refused its input, and said why in one line (torchrun then
            # ended the others, which are failures too)
        raise
    return 0
