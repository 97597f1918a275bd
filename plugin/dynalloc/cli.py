"""The `dynalloc` command: one subcommand per module, user errors as one line and exit code 2.

Each subcommand's module has `add_arguments(parser)` and `run(args)`. Only the module of the
command given is imported, so that `--help` is instant and every command works in the one
environment it needs (the analysis imports pandas, training MXNet and mpi4py). Where the
command's extra is missing, the error names the extra to install (`dynalloc.extras`).
"""

import argparse
import sys
import time

from dynalloc import __version__
from dynalloc.errors import DynallocError
from dynalloc.extras import missing_extra
from dynalloc.launcher import launcher_rank

COMMANDS = {
    "stage": ("dynalloc.data.stage", "stage a dataset: arrays to memory-map, or images indexed"),
    "verify": ("dynalloc.data.verify", "decode every image of a staged dataset once"),
    "train": (
        "dynalloc.runtime.common.train",
        "train a model over MPI ranks with dynamic batch allocation",
    ),
    "supervise": (
        "dynalloc.runtime.common.job",
        "run a launch of `dynalloc train`, restarting it on the ranks left after a loss",
    ),
    "torchrun": (
        "dynalloc.runtime.torch.torchrun",
        "torchrun itself, with dynalloc's exit codes (a refused input: 2)",
    ),
    "baseline": (
        "dynalloc.runtime.mxnet.baseline",
        "the same run with MXNet's dist_sync parameter server",
    ),
    "summarize": ("dynalloc.analysis.summary", "one run's summary row"),
    "compare": ("dynalloc.analysis.compare", "tables and plots across runs"),
    "show": ("dynalloc.analysis.show", "a results table in the terminal, rounded"),
    "replay": ("dynalloc.analysis.replay", "every policy replayed on the speeds a run measured"),
    "convert-checkpoint": (
        "dynalloc.runtime.common.convert",
        "rewrite checkpoints of the first, pickled format as data (only ones you trust)",
    ),
    "simulate": (
        "dynalloc.analysis.planner",
        "every policy on a modelled cluster (a cluster file, or one fitted from a run)",
    ),
    "run-config": (
        "dynalloc.experiment.write_run_config",
        "write one run's config of the pipeline grid as YAML",
    ),
}


PASSED_ON = ("torchrun",)  # commands whose arguments are another program's, parsed by it


def build_parser(command=None):
    """The parser, with the arguments of `command` (the one to run) added."""
    parser = argparse.ArgumentParser(
        prog="dynalloc",
        description="Dynamic batch allocation for synchronous data-parallel MXNet training.",
    )
    parser.add_argument("--version", action="version", version=f"dynalloc {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module)
        if name == command:
            __import__(module, fromlist=["add_arguments"]).add_arguments(sub)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((word for word in argv if not word.startswith("-")), None)
    try:
        parser = build_parser(command)  # imports the command's module
        if command in PASSED_ON:
            args, rest = parser.parse_known_args(argv)
            args.passed_on = rest + args.passed_on
        else:
            args = parser.parse_args(argv)
        return __import__(args.module, fromlist=["run"]).run(args) or 0
    except DynallocError as error:
        return fail(command, error)
    except ModuleNotFoundError as error:
        message = missing_extra(error)
        if message is None:
            raise
        return fail(command, message)
    except KeyboardInterrupt:
        return 130


def fail(command, message):
    """Exit code 2, after one line on stderr from rank 0 (every rank fails alike). The others
    leave a second later: torchrun stops a group at its first exit, which could otherwise be
    theirs, before rank 0 has said why."""
    if launcher_rank() == 0:
        print(f"dynalloc {command}: error: {message}", file=sys.stderr)
    else:
        time.sleep(1.0)
    return 2


if __name__ == "__main__":
    sys.exit(main())
