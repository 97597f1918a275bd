"""`dynalloc compare`: the tables and figures that set the runs side by side, each run's
throughput against the static run of its group. Each table is written as CSV and as an HTML
page (`table_page`) that the Snakemake report shows in the page, where a CSV is only a download.
"""

from html import escape
from pathlib import Path

import pandas as pd

from dynalloc import rundir
from dynalloc.analysis import plots
from dynalloc.analysis.runs import read_csv
from dynalloc.analysis.show import rounded
from dynalloc.analysis.summary import SUMMARY_FIELDS
from dynalloc.errors import DynallocError
from dynalloc.experiment.grid import COMPARED_BY
from dynalloc.fsutil import atomic_write

# A run is comparable with the static run that shares all of these.
GROUP = list(COMPARED_BY)

# The tables' pages: {name: (title, the columns whose change starts a new block of rows, the
# columns of settings that, when every row has the same value, are said once above the table)}.
PAGES = {
    "summary": ("Summary: one row per run", GROUP, [*GROUP, "global_batch", "iterations"]),
    "speedup": ("Speedup: each run's samples/s over the static run of its group", GROUP, GROUP),
    "replay": (
        "Replay: every policy driven through each run's measured speeds",
        ["run"],
        ["new_shape", "iterations"],
    ),
}
PAGE_STYLE = """
body { font: 13px/1.45 system-ui, sans-serif; margin: 1em 1.2em; color: #1e293b; }
h1 { font-size: 1.2em; margin: 0 0 .2em; }
p { margin: 0 0 .9em; color: #475569; max-width: 70em; }
table { border-collapse: collapse; }
th, td { padding: .25em .6em; border-bottom: 1px solid #e2e8f0; }
th { position: sticky; top: 0; background: #f1f5f9; text-align: left; font-weight: 600;
     vertical-align: bottom; min-width: 4.5em; }
td { min-width: 6em; }
td.policy { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap;
         min-width: 0; }
tr.block td { border-top: 2px solid #94a3b8; }
tbody tr:hover { background: #f8fafc; }
.swatch { display: inline-block; width: .75em; height: .75em; margin-right: .4em;
          border-radius: 2px; vertical-align: -.05em; }
"""


def add_arguments(parser):
    for option, metavar, what in (
        ("--summaries", "JSON", "summary rows written by dynalloc summarize"),
        ("--runs", "DIR", "run directories whose shares, timing and convergence to plot"),
    ):
        parser.add_argument(option, nargs="+", required=True, type=Path, metavar=metavar, help=what)
    parser.add_argument(
        "--replay", type=Path, metavar="CSV", help="replay.csv of dynalloc replay, for its page"
    )
    parser.add_argument(
        "--tables-dir",
        required=True,
        type=Path,
        help="gets summary.csv and speedup.csv, and summary.html, speedup.html (and with "
        "--replay replay.html): the tables as pages for the report",
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
    tables = {"summary": summary, "speedup": speedup}
    for name, table in tables.items():
        with atomic_write(args.tables_dir / f"{name}.csv", newline="") as handle:
            table.to_csv(handle, index=False)
    if args.replay is not None:
        tables["replay"] = read_csv(args.replay)
    for name, table in tables.items():
        with atomic_write(args.tables_dir / f"{name}.html") as handle:
            handle.write(table_page(table, name, *PAGES[name]))
    plots.plot_shares(args.runs, args.plots_dir / "shares.png")
    plots.plot_timing(args.runs, args.plots_dir / "timing.png")
    plots.plot_convergence(args.runs, args.plots_dir / "convergence.png")
    plots.plot_throughput(summary, args.plots_dir / "throughput.png", speedup)


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


def table_page(table, name, title, blocks=(), settings=()):
    """A standalone HTML page of `table` (written as `name`.csv): numbers to 3 significant
    digits (whole numbers from 100 up) and right-aligned, each policy with its colour in the
    figures, a rule above each block of rows that share the columns `blocks`; the columns of
    `settings` that hold one value in every row (of two or more) are said once above it."""
    same = [c for c in settings if c in table and len(table) > 1 and table[c].nunique() == 1]
    said = ", ".join(f"{escape(str(c))} {_value(table[c].iloc[0])}" for c in same)
    shown = table.drop(columns=same)
    colours = plots.policy_colours(table["policy"]) if "policy" in table else {}
    numeric = [pd.api.types.is_numeric_dtype(shown[c]) for c in shown.columns]
    # a long name may break after its underscores, so that narrow numbers keep narrow columns
    head = "".join(f"<th>{escape(str(c)).replace('_', '_<wbr>')}</th>" for c in shown.columns)
    rows, previous = [], None
    for record in table.to_dict("records"):
        block = tuple(record[c] for c in blocks)
        marked = ' class="block"' if previous is not None and block != previous else ""
        previous = block
        cells = "".join(
            _cell(column, record[column], number, colours)
            for column, number in zip(shown.columns, numeric, strict=True)
        )
        rows.append(f"<tr{marked}>{cells}</tr>")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{PAGE_STYLE}</style></head><body>\n"
        f"<h1>{escape(title)}</h1>\n<p>{len(table)} rows of {escape(name)}.csv"
        + (f"; in every one: {said}" if said else "")
        + ". Numbers to 3 significant digits; the file itself is under CSV files. How to read "
        "it: the description of this table in the report's side panel.</p>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + "\n"
        "</tbody></table></body></html>\n"
    )


def _cell(column, value, numeric, colours):
    text = _value(value)
    if numeric and text:
        return f'<td class="num">{text}</td>'
    if column == "policy" and value in colours:
        swatch = f'<span class="swatch" style="background:{colours[value]}"></span>'
        return f'<td class="policy">{swatch}{text}</td>'
    return f"<td>{text}</td>"


def _value(value):
    """A cell's text, rounded as `dynalloc show` rounds it."""
    return escape(rounded(value))
