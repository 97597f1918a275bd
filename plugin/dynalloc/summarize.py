"""`dynalloc summarize`: one run directory reduced to its summary row, for `dynalloc compare`."""

from pathlib import Path


def add_arguments(parser):
    parser.add_argument("--run-dir", required=True, type=Path, help="a run made by dynalloc train")
    parser.add_argument("--out", required=True, type=Path, help="the summary row (JSON)")


def run(args):
    from dynalloc.analysis import summarize_run  # pandas: only the workflow env has it
    from dynalloc.telemetry import write_json

    summary = summarize_run(args.run_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, summary)
