"""`dynalloc summarize`: one run directory reduced to its summary row, for `dynalloc compare`:
throughput, waiting, accuracy and how fast the split balanced again after each change."""

from pathlib import Path

import numpy as np

from dynalloc import rundir
from dynalloc.analysis.runs import load_run

SUMMARY_FIELDS = (
    "run",
    "dataset",
    "scenario",
    "model",
    "policy",
    "ranks",
    "seed",
    "global_batch",
    "iterations",
    "wall_s",
    "samples_per_s",
    "mean_wait_fraction",
    "max_wait_fraction",
    "final_test_accuracy",
    "time_to_target_s",
    "iterations_until_balanced",
)
# Balanced again after an event (the start, or a change of speed): the split has reached the one
# the policy keeps for the rest of the phase (at most SPLIT_TOLERANCE of the global batch on other
# ranks than in the phase's settled split, for BALANCED_FOR iterations in a row), and that split
# balances the ranks (mean wait fraction of the phase's second half below WAIT_BELOW). Judged on
# the split, not on per-iteration compute times, so the noise of ranks sharing cores, which puts
# a few iterations above any fixed spread, does not count as imbalance.
SPLIT_TOLERANCE = 0.05
BALANCED_FOR = 3
WAIT_BELOW = 0.1


def add_arguments(parser):
    parser.add_argument("--run-dir", required=True, type=Path, help="a run made by dynalloc train")
    parser.add_argument("--out", required=True, type=Path, help="the summary row (JSON)")


def run(args):
    summary = summarize_run(args.run_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rundir.write_json(args.out, summary)


def summarize_run(run_dir):
    """One row (a dict in SUMMARY_FIELDS order) describing the run in `run_dir`."""
    run = load_run(run_dir)
    waits = rundir.wait_fractions(
        run.iterations.reindex(columns=rundir.ROW_FIELDS).to_numpy(), run.metrics["ranks"]
    )
    metrics = run.metrics
    return {
        "run": run.name,
        "dataset": run.labels.get("dataset", ""),
        "scenario": run.scenario,
        "model": metrics["model"],
        "policy": run.labels.get("policy", run.policy),  # a variant's name, as the plots
        "ranks": metrics["ranks"],
        "seed": run.config.get("seed"),
        "global_batch": metrics["global_batch"],
        "iterations": metrics["iterations"],
        "wall_s": metrics["wall_s"],
        "samples_per_s": metrics["samples_per_s"],
        "mean_wait_fraction": float(np.mean(waits)),
        "max_wait_fraction": float(np.max(waits)),
        "final_test_accuracy": metrics["final_test_accuracy"],
        "time_to_target_s": metrics["time_to_target_s"],
        "iterations_until_balanced": iterations_until_balanced(run.iterations, _events(run)),
    }


def iterations_until_balanced(iterations, events):
    """The most iterations any event took until the split was balanced again (see SPLIT_TOLERANCE;
    0: at once); None if after some event it never was. Events after the last iteration are
    ignored: the run never saw them."""
    by_rank = iterations.pivot(index="iteration", columns="rank")
    fractions = by_rank["batch_size"].div(by_rank["batch_size"].sum(axis=1), axis=0).to_numpy()
    compute, wait = by_rank["compute_s"].to_numpy(), by_rank["wait_s"].to_numpy()
    if "data_s" in by_rank:
        compute = compute + by_rank["data_s"].to_numpy()
    index = by_rank.index.to_numpy()
    starts = sorted({int(np.searchsorted(index, event)) for event in events} - {len(index)})
    worst = 0
    for first, end in zip(starts, [*starts[1:], len(index)], strict=True):
        late = slice((first + end) // 2, end)
        busy = compute[late].sum() + wait[late].sum()
        if busy > 0 and wait[late].sum() / busy >= WAIT_BELOW:
            return None
        settled = np.median(fractions[late], axis=0)
        close = np.abs(fractions[first:end] - settled).sum(axis=1) <= SPLIT_TOLERANCE
        run = min(BALANCED_FOR, end - first)
        hits = np.flatnonzero(np.convolve(close, np.ones(run, int), "valid") == run)
        if hits.size == 0:
            return None
        worst = max(worst, int(index[first + hits[0]] - index[first]))
    return worst


def _events(run):
    """The start of the run and every start and end of a scenario change."""
    events = [int(run.iterations["iteration"].min())]
    for change in (run.config.get("scenario") or {}).get("changes") or ():
        events += [change[key] for key in ("start", "end") if change.get(key) is not None]
    return events
