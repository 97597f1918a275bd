"""What a training run achieved, as one summary row, and how runs compare to the static policy.

Pure pandas and numpy over the files of a run directory (see DESIGN.md, Contracts), so the
workflow environment, which cannot import MXNet, reads runs made anywhere. Every unreadable input
is one DynallocError naming the file.
"""

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dynalloc.config import load_config
from dynalloc.errors import DynallocError
from dynalloc.grid import COMPARED_BY
from dynalloc.policies import REPLAYABLE, make_policy
from dynalloc.scenario import Scenario
from dynalloc.simulate import replay

ITERATION_COLUMNS = ("iteration", "epoch", "rank", "batch_size", "compute_s", "wait_s")
EPOCH_COLUMNS = ("epoch", "wall_s", "train_loss", "test_accuracy")
METRICS_KEYS = (
    "policy",
    "ranks",
    "model",
    "global_batch",
    "iterations",
    "wall_s",
    "samples_per_s",
    "final_test_accuracy",
    "time_to_target_s",
)
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
# A run is comparable with the static run that shares all of these.
GROUP = list(COMPARED_BY)
# Balanced again after an event (the start, or a change of speed): the split has reached the one
# the policy keeps for the rest of the phase (at most SPLIT_TOLERANCE of the global batch on other
# ranks than in the phase's settled split, for BALANCED_FOR iterations in a row), and that split
# balances the ranks (mean wait fraction of the phase's second half below WAIT_BELOW). Judged on
# the split, not on per-iteration compute times, so the noise of ranks sharing cores, which puts
# a few iterations above any fixed spread, does not count as imbalance.
SPLIT_TOLERANCE = 0.05
BALANCED_FOR = 3
WAIT_BELOW = 0.1


@dataclass(frozen=True)
class Run:
    """The files of one run directory, read and checked."""

    name: str
    labels: dict
    config: dict
    metrics: dict
    iterations: pd.DataFrame
    epochs: pd.DataFrame

    @property
    def policy(self):
        return self.metrics["policy"]

    @property
    def scenario(self):
        return self.labels.get("scenario", "")


def load_run(run_dir):
    run_dir = Path(run_dir)
    config = load_config(run_dir / "config.yaml")
    labels = {key: str(value) for key, value in (config.get("labels") or {}).items()}
    return Run(
        name=labels.get("run", run_dir.name),
        labels=labels,
        config=config,
        metrics=read_json(run_dir / "metrics.json", METRICS_KEYS),
        iterations=_read_csv(run_dir / "iterations.csv", ITERATION_COLUMNS),
        epochs=_read_csv(run_dir / "epochs.csv", EPOCH_COLUMNS),
    )


def summarize_run(run_dir):
    """One row (a dict in SUMMARY_FIELDS order) describing the run in `run_dir`."""
    run = load_run(run_dir)
    waits = wait_fractions(run.iterations)
    metrics = run.metrics
    return {
        "run": run.name,
        "dataset": run.labels.get("dataset", ""),
        "scenario": run.scenario,
        "model": metrics["model"],
        "policy": run.policy,
        "ranks": metrics["ranks"],
        "seed": run.config.get("seed"),
        "global_batch": metrics["global_batch"],
        "iterations": metrics["iterations"],
        "wall_s": metrics["wall_s"],
        "samples_per_s": metrics["samples_per_s"],
        "mean_wait_fraction": float(waits.mean()),
        "max_wait_fraction": float(waits.max()),
        "final_test_accuracy": metrics["final_test_accuracy"],
        "time_to_target_s": metrics["time_to_target_s"],
        "iterations_until_balanced": iterations_until_balanced(run.iterations, _events(run)),
    }


def wait_fractions(iterations):
    """Per rank: the share of its busy time (compute + wait) spent waiting for the slowest."""
    sums = iterations.groupby("rank")[["compute_s", "wait_s"]].sum()
    busy = sums["compute_s"] + sums["wait_s"]
    return (sums["wait_s"] / busy.where(busy > 0)).fillna(0.0)


def measured_speeds(iterations):
    """Each rank's seconds per sample in each full iteration after the first (MXNet's warm-up),
    iterations x ranks: the machine a run met, for `simulate.replay` to drive other policies on.
    An epoch's last, smaller batch is left out: a rank may have no sample in it."""
    return full_iterations(iterations)[0]


def full_iterations(iterations):
    """(seconds per sample, epoch, iteration number) of the full iterations after the first:
    iterations x ranks, then one of each per iteration."""
    by_rank = iterations.pivot(index="iteration", columns="rank")
    batch = by_rank["batch_size"].sum(axis=1)
    kept = by_rank[batch == batch.max()].iloc[1:]
    speeds = (kept["compute_s"] / kept["batch_size"]).to_numpy()
    return speeds, kept["epoch"].max(axis=1).to_numpy(), kept.index.to_numpy()


def replay_run(run_dir, policies=REPLAYABLE, params=None, new_shapes=(0.0,), jitter_draw=0):
    """Each of `policies` driven through the seconds per sample that the run in `run_dir`
    measured (`simulate.replay`, under the run's global batch and share bounds; `params` maps a
    policy to its parameters), once per new-shape cost: one row per (policy, new_shape) with the
    replayed compute time (each iteration's slowest rank, summed) and how many times it changed
    the split. Which policy would have been fastest on the machine this run met, without
    training again; with `jitter_draw` > 0, on that machine under another draw of the run's
    emulated jitter (`redraw_jitter`)."""
    run = load_run(run_dir)
    speeds, epochs, numbers = full_iterations(run.iterations)
    if not len(speeds):
        raise DynallocError(f"{run_dir}: no full iteration after the warm-up to replay")
    config, rows = run.config, []
    if jitter_draw:
        speeds = redraw_jitter(speeds, numbers, config.get("scenario") or {}, jitter_draw)
    for name, new_shape in itertools.product(policies, new_shapes):
        try:
            policy = make_policy(
                name,
                speeds.shape[1],
                int(run.metrics["global_batch"]),
                config.get("min_share", 1),
                config.get("max_share"),
                **(params or {}).get(name, {}),
            )
        except ValueError as error:
            raise DynallocError(str(error)) from None
        trace = replay(policy, speeds, new_shape, epochs)
        rows.append(
            {
                "run": run.name,
                "policy": name,
                "new_shape": new_shape,
                "iterations": len(speeds),
                "replayed_s": float(trace.times.max(axis=1).sum()),
                "split_changes": int(np.any(np.diff(trace.shares, axis=0), axis=1).sum()),
            }
        )
    return rows


def redraw_jitter(speeds, iterations, scenario, draw):
    """`speeds` (seconds per sample, iterations x ranks, at the run's `iterations`) measured
    under the emulated `scenario`, as they would have been under its jitter's `draw`: divided by
    the factors the ranks slept by, times the other draw's. Every run of a jittered scenario
    meets one draw (it depends on rank and iteration only); other draws tell a policy's merit
    from that draw's luck."""
    ranks = speeds.shape[1]
    try:
        own = Scenario(ranks, **scenario)
        other = Scenario(ranks, **{**scenario, "jitter_draw": draw})
    except (TypeError, ValueError) as error:
        raise DynallocError(f"cannot redraw the jitter of scenario {scenario!r}: {error}") from None

    def factors(emulated):
        return np.array([[emulated.factor(r, int(i)) for r in range(ranks)] for i in iterations])

    return speeds * factors(other) / factors(own)


def iterations_until_balanced(iterations, events):
    """The most iterations any event took until the split was balanced again (see SPLIT_TOLERANCE;
    0: at once); None if after some event it never was. Events after the last iteration are
    ignored: the run never saw them."""
    by_rank = iterations.pivot(index="iteration", columns="rank")
    fractions = by_rank["batch_size"].div(by_rank["batch_size"].sum(axis=1), axis=0).to_numpy()
    compute, wait = by_rank["compute_s"].to_numpy(), by_rank["wait_s"].to_numpy()
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


def read_json(path, keys):
    """The JSON object in `path`, which must hold `keys`."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise DynallocError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise DynallocError(f"{path} is not valid JSON") from None
    if not isinstance(data, dict):
        raise DynallocError(f"{path} must hold a JSON object")
    missing = [key for key in keys if key not in data]
    if missing:
        raise DynallocError(f"{path} lacks key(s): {', '.join(missing)}")
    return data


def _read_csv(path, columns):
    try:
        table = pd.read_csv(path)
    except OSError as error:
        raise DynallocError(f"cannot read {path}: {error.strerror}") from None
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise DynallocError(f"{path} is not a readable CSV file") from None
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise DynallocError(f"{path} lacks column(s): {', '.join(missing)}")
    if table.empty:
        raise DynallocError(f"{path} has no rows")
    not_numbers = [c for c in columns if not pd.api.types.is_numeric_dtype(table[c])]
    if not_numbers:
        raise DynallocError(f"{path}: column(s) {', '.join(not_numbers)} must hold numbers")
    return table
