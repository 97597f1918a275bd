"""`dynalloc show`: a results table (summary.csv, speedup.csv, replay.csv, simulate.csv) in the
terminal, its numbers rounded as the report rounds them (3 significant digits, whole numbers from
100 up), so that a closing table reads at a glance; the CSV keeps every digit."""

import numbers
import sys
from pathlib import Path

import pandas as pd

from dynalloc.analysis.runs import read_csv
from dynalloc.errors import DynallocError


def add_arguments(parser):
    parser.add_argument("table", type=Path, help="a CSV file of the analysis")
    parser.add_argument("--columns", nargs="+", metavar="NAME", help="only these columns")


def run(args):
    table = read_csv(args.table)
    unknown = [c for c in args.columns or () if c not in table.columns]
    if unknown:
        raise DynallocError(
            f"--columns: {args.table} has no column {unknown[0]!r}; its columns: "
            f"{', '.join(map(str, table.columns))}"
        )
    sys.stdout.write(text_table(table, args.columns))


def rounded(value):
    """A cell's text: empty for a missing value, numbers to 3 significant digits."""
    if value is None or pd.isna(value):
        return ""
    if isinstance(value, numbers.Integral):
        return str(value)
    if isinstance(value, numbers.Real):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def text_table(table, columns=None):
    """The table as aligned text: numbers right, words left, one line a row."""
    if columns:
        table = table[list(columns)]
    cells = [[rounded(v) for v in row] for row in table.itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(table[c]) for c in table.columns]
    widths = [
        max(len(str(name)), *(len(row[i]) for row in cells)) if cells else len(str(name))
        for i, name in enumerate(table.columns)
    ]

    def line(values):
        return "  ".join(
            v.rjust(w) if right else v.ljust(w)
            for v, w, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    return "\n".join([line([str(c) for c in table.columns]), *map(line, cells)]) + "\n"
