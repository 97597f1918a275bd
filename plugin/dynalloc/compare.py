"""`dynalloc compare`: the tables and figures that set the runs side by side."""

from pathlib import Path

from dynalloc.fsutil import atomic_write


def add_arguments(parser):
    parser.add_argument(
        "--summaries",
        nargs="+",
        required=True,
        type=Path,
        metavar="JSON",
        help="summary rows written by dynalloc summarize",
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        required=True,
        type=Path,
        metavar="DIR",
        help="run directories whose shares, timing and convergence to plot",
    )
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
    from dynalloc import plots  # pandas and matplotlib: only the workflow env has them
    from dynalloc.analysis import SUMMARY_FIELDS, compare, read_json

    summary, speedup = compare([read_json(path, SUMMARY_FIELDS) for path in args.summaries])
    args.tables_dir.mkdir(parents=True, exist_ok=True)
    args.plots_dir.mkdir(parents=True, exist_ok=True)
    for name, table in (("summary.csv", summary), ("speedup.csv", speedup)):
        with atomic_write(args.tables_dir / name, newline="") as handle:
            table.to_csv(handle, index=False)
    plots.plot_shares(args.runs, args.plots_dir / "shares.png")
    plots.plot_timing(args.runs, args.plots_dir / "timing.png")
    plots.plot_convergence(args.runs, args.plots_dir / "convergence.png")
    plots.plot_throughput(summary, args.plots_dir / "throughput.png")
