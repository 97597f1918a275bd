"""The statistics of a benchmark (`make bench`, `make bench-repeats`; `benchmarks/report.py`):
adaptive's ratios to its rivals, paired by seed, the targets' verdicts (met or missed on the
median of those ratios; a race run once is not judged), the run-to-run noise band the prose
explains that rule with, the spreads of the final accuracy, and every number the discussion cites.

Pandas over the pipeline's summary.csv and speedup.csv: one row per run, joined and ordered by
`load`. The paired replay on each run's measured speeds is `benchreplay`'s.
"""

import math

import numpy as np
import pandas as pd

from dynalloc.errors import DynallocError

ORDER = ["static", "proportional", "dbs", "controller", "oracle", "adaptive", "dist_sync"]
COMPETITORS = ["static", "proportional", "dbs", "controller", "dist_sync"]  # non-oracle
# The runs that split equally all along (dbs and oracle where they cannot move) differ only by
# the machine's drift: their spread is how far one ratio of two runs may be off.
EQUAL_SPLIT = ["static", "dbs", "oracle"]


def load(results):
    """The pipeline's summary joined with its speedups over each group's static run, ordered by
    model, scenario and ORDER."""
    for name in ("summary.csv", "speedup.csv"):
        if not (results / name).is_file():
            raise DynallocError(f"{results / name} is missing: run the bench that writes {results}")
    summary = pd.read_csv(results / "summary.csv")
    speedup = pd.read_csv(results / "speedup.csv")[["run", "speedup"]]
    table = summary.merge(speedup, on="run", how="left")
    table["order"] = table["policy"].map({p: i for i, p in enumerate(ORDER)})
    return table.sort_values(["model", "scenario", "order"], ignore_index=True)


def train_dir(results, run):
    """The directory in which the pipeline trained `run` (a name of summary.csv's)."""
    return results / "runs" / run / "train"


def races(table, repeats):
    """The LeNet runs of every (scenario, policy) that `make bench-repeats` repeated, seed 0
    from `make bench`: one row per (scenario, policy, seed)."""
    repeats = repeats[repeats["model"] == "lenet"]
    repeated = repeats[["scenario", "policy"]].drop_duplicates()
    first = table[table["model"] == "lenet"].merge(repeated, on=["scenario", "policy"])
    runs = pd.concat([first, repeats], ignore_index=True)
    return runs.sort_values(["scenario", "order", "seed"], ignore_index=True)


def lenet(table, scenario):
    """The LeNet runs of `scenario`, by policy."""
    rows = table[(table["model"] == "lenet") & (table["scenario"] == scenario)]
    return rows.set_index("policy")


def ratios(table, runs, scenario, mine, rival):
    """`mine`'s LeNet samples/s over `rival`'s: one ratio per seed where `make bench-repeats`
    ran both again (seed 0 from `make bench`, `races` joins it; the runs of one seed follow each
    other, so each ratio spans minutes), else the one of `make bench`."""
    if runs is not None:
        rows = runs[runs["scenario"] == scenario]
        sps = rows.pivot(index="seed", columns="policy", values="samples_per_s")
        if {mine, rival} <= set(sps.columns):
            return (sps[mine] / sps[rival]).dropna().tolist()
    sps = lenet(table, scenario)["samples_per_s"]
    return [sps[mine] / sps[rival]]


def per_seed(table, runs, scenario, policy, column):
    """{seed: `column`} of `policy`'s LeNet runs of `scenario`: every seed where
    `make bench-repeats` ran it again, else seed 0's of `make bench`."""
    if runs is not None:
        rows = runs[(runs["scenario"] == scenario) & (runs["policy"] == policy)]
        if len(rows):
            return dict(zip(rows["seed"], rows[column], strict=True))
    row = lenet(table, scenario).loc[policy]
    return {int(row["seed"]): row[column]}


def verdict(measured, threshold, rival):
    """(what was measured, verdict) for ratios to `rival`, one per seed, each between two runs
    of one block: met or missed on their median, shown with its spread over the seeds. A single
    ratio is shown and not judged: one pair of runs measures the machine's drift between them as
    much as the policies (the noise band)."""
    if len(measured) == 1:
        return f"{measured[0]:.3f}× `{rival}`", not_judged()
    median = float(np.median(measured))
    spread = f"{min(measured):.3f}-{max(measured):.3f} over {len(measured)} seeds"
    return f"median {median:.3f}× `{rival}`, {spread}", mark(median >= threshold)


def balance_verdict(worst, limit):
    """(what was measured, verdict) for each seed's worst change, `worst` ({seed: iterations
    until balanced again}, NaN where the run never balanced): met or missed on their median,
    each seed's shown; a single run is not judged, as a single ratio is not."""
    iterations = {seed: math.inf if pd.isna(v) else float(v) for seed, v in worst.items()}
    if len(iterations) == 1:
        return f"{_iterations(*iterations.values())} iterations (worst change)", not_judged()
    median = float(np.median(list(iterations.values())))
    seeds = ", ".join(f"{_iterations(v)} (seed {seed})" for seed, v in iterations.items())
    shown = f"median {_iterations(median)} iterations (each run's worst change): {seeds}"
    return shown, mark(median <= limit)


def _iterations(value):
    return "never" if math.isinf(value) else f"{value:g}"


def not_judged(rivals=()):
    """The verdict of a target measured on one run (of `rivals`, where others ran again)."""
    once = f"one run of {', '.join(f'`{rival}`' for rival in rivals)}" if rivals else "one run"
    return f"not judged: {once} (make bench-repeats judges it)"


def mark(ok):
    return "met" if ok else "**missed**"


def noise_band(table):
    """The spread of samples/s among the homogeneous LeNet runs that split equally all along,
    over the slowest of them (0 without such runs)."""
    same = lenet(table, "homogeneous").reindex(EQUAL_SPLIT)["samples_per_s"]
    return float((same.max() - same.min()) / same.min()) if same.notna().any() else 0


def seed_spreads(runs):
    """Each repeated (scenario, policy)'s range of final test accuracy across its seeds."""
    return runs.groupby(["scenario", "policy"])["final_test_accuracy"].agg(np.ptp)


def facts(table, runs=None, replays=None):
    """Every number the discussion may cite, by `{kind[scenario][policy]}`; with repeats also
    `median` and `median_wait` (samples/s and mean wait fraction over the seeds) and `paired`,
    `lowest`, `highest` (the median, least and greatest of adaptive's per-seed ratios to each
    rival); with replays (`benchreplay.replay_ratios`) `replay` and `replay_free` (adaptive's
    median ratio to each rival on the same speeds, with and without the new-shape cost), `wins`
    and `ties` (on how many runs' speeds adaptive was faster, and exactly as fast, with that
    cost) and `traces` (how many runs' speeds there were)."""
    values = _per_run(table)
    spreads = table.groupby(["model", "scenario"])["final_test_accuracy"].agg(np.ptp)
    values["spread"] = float(spreads.max())
    resnet = table[table["model"] == "resnet"].set_index("policy")
    values["resnet"] = resnet["samples_per_s"].to_dict()
    values["noise"] = noise_band(table)
    if runs is not None:
        values.update(_over_seeds(table, runs))
    if replays is not None:
        values.update(_replayed(replays))
    return values


def _per_run(table):
    """`sps`, `speedup`, `wait`, `accuracy`, `balance` and adaptive's `ratio` to each other
    policy, by scenario and policy, of the LeNet runs of `make bench`."""
    columns = {
        "sps": "samples_per_s",
        "speedup": "speedup",
        "wait": "mean_wait_fraction",
        "accuracy": "final_test_accuracy",
        "balance": "iterations_until_balanced",
    }
    values = {kind: {} for kind in [*columns, "ratio"]}
    for scenario in table.loc[table["model"] == "lenet", "scenario"].unique():
        rows = lenet(table, scenario)
        for kind, column in columns.items():
            values[kind][scenario] = rows[column].to_dict()
        others = rows.drop(index="adaptive", errors="ignore")["samples_per_s"]
        values["ratio"][scenario] = {
            name: rows.loc["adaptive", "samples_per_s"] / others[name] for name in others.index
        }
    return values


def _over_seeds(table, runs):
    values = {"median": {}, "median_wait": {}, "paired": {}, "lowest": {}, "highest": {}}
    for scenario, rows in runs.groupby("scenario"):
        by_policy = rows.groupby("policy")
        values["median"][scenario] = by_policy["samples_per_s"].median().to_dict()
        values["median_wait"][scenario] = by_policy["mean_wait_fraction"].median().to_dict()
        rivals = set(rows["policy"]) - {"adaptive"}
        against = {rival: ratios(table, runs, scenario, "adaptive", rival) for rival in rivals}
        for kind, statistic in (("paired", np.median), ("lowest", min), ("highest", max)):
            values[kind][scenario] = {k: float(statistic(v)) for k, v in against.items()}
    values["seed_spread"] = float(seed_spreads(runs).max())
    return values


def _replayed(replays):
    values = {"replay": {}, "replay_free": {}, "wins": {}, "ties": {}, "traces": {}}
    for scenario, rows in replays.groupby("scenario"):
        charged = rows[rows["new_shape"] > 0].set_index("rival")
        free = rows[rows["new_shape"] == 0].set_index("rival")
        values["replay"][scenario] = charged["median"].to_dict()
        values["replay_free"][scenario] = free["median"].to_dict()
        values["wins"][scenario] = charged["wins"].to_dict()
        values["ties"][scenario] = charged["ties"].to_dict()
        values["traces"][scenario] = int(charged["traces"].max())
    return values
