"""`dynalloc compare`: the tables and figures that set the runs side by side, each run's
throughput against the static run of its group."""

from pathlib import Path

import pandas as pd

from dynalloc import rundir
from dynalloc.analysis import plots
from dynalloc.analysis.summary import SUMMARY_FIELDS
from dynalloc.errors import DynallocError
from dynalloc.experiment.grid import COMPARED_BY
from dynalloc.fsutil import atomic_write

# A run is comparable with the static run that shares all of these.
GROUP = list(COMPARED_BY)


def add_arguments(parser):
    for option, metavar, what in (
        ("--summaries", "JSON", "summary rows written by dynalloc summarize"),
        ("--runs", "DIR", "run directories whose shares, timing and convergence to plot"),
    ):
        parser.add_argument(option, nargs="+", required=True, type=Path, metavar=metavar, help=what)
    parser.add_argument(
        "--tables-dir", required=True, type=Path, help="gets summary.csv and speedup.csv"
    )
    parser.add_argument(
        "--plots-dir",
        required=True,
        type=Path,
        help="gets shares.png, timing.png, convergence.png and throughput.png",
    )


def run(args):
    summaries = [rundir.read_json(path, SUMMARY_FIELDS) for path in args.summaries]
    summary, speedup = compare(summaries)
    args.tables_dir.mkdir(parents=True, exist_ok=True)
    args.plots_dir.mkdir(parents=True, exist_ok=True)
    for name, table in (("summary.csv", summary), ("speedup.csv", speedup)):
        with atomic_write(args.tables_dir / name, newline="") as handle:
            table.to_csv(handle, index=False)
    plots.plot_shares(args.runs, args.plots_dir / "shares.png")
    plots.plot_timing(args.runs, args.plots_dir / "timing.png")
    plots.plot_convergence(args.runs, args.plots_dir / "convergence.png")
    plots.plot_throughput(summary, args.plots_dir / "throughput.png")


def compare(summaries):
    """(summary table, speedup table): samples/s of each run over its group's static run."""
    if not summaries:
        raise DynallocError("no run summaries to compare")
    table = pd.DataFrame(list(summaries), columns=list(SUMMARY_FIELDS))
    table["iterations_until_balanced"] = table["iterations_until_balanced"].astype("Int64")
    table = table.sort_values([*GROUP, "policy"], kind="stable", ignore_index=True)
    static = table.loc[table["policy"] == "static", [*GROUP, "run", "samples_per_s"]]
    twins = static[static.duplicated(GROUP, keep=False)]
    if not twins.empty:
        raise DynallocError(
            f"runs {', '.join(twins['run'])} are all static with the same "
            f"{', '.join(GROUP)}: label each run's dataset and scenario to tell them apart"
        )
    static = static.drop(columns="run").rename(columns={"samples_per_s": "static_samples_per_s"})
    speedup = table[[*GROUP, "policy", "run", "samples_per_s"]].merge(static, on=GROUP, how="left")
    speedup["speedup"] = speedup["samples_per_s"] / speedup["static_samples_per_s"]
    return table, speedup
