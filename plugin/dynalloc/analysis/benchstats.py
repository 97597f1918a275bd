"""The statistics of a benchmark (`make bench`, `make bench-repeats`; `benchmarks/report.py`):
adaptive's ratios to its rivals, paired by seed, verdicts on a target within the run-to-run noise
band, the spreads of the final accuracy, and every number the discussion cites.

Pandas over the pipeline's summary.csv and speedup.csv: one row per run, joined and ordered by
`load`. The paired replay on each run's measured speeds is `benchreplay`'s.
"""

import numpy as np
import pandas as pd

from dynalloc.errors import DynallocError

ORDER = ["static", "proportional", "dbs", "controller", "oracle", "adaptive", "dist_sync"]
COMPETITORS = ["static", "proportional", "dbs", "controller", "dist_sync"]  # non-oracle
# The runs that split equally all along (dbs and oracle where they cannot move) differ only by
# the machine's drift: their spread is the band within which a single ratio is noise.
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
    ran both again (the runs of one seed follow each other, so each ratio spans minutes), else
    the one of `make bench`."""
    if runs is not None:
        rows = runs[runs["scenario"] == scenario]
        sps = rows.pivot(index="seed", columns="policy", values="samples_per_s")
        if {mine, rival} <= set(sps.columns):
            return (sps[mine] / sps[rival]).dropna().tolist()
    sps = lenet(table, scenario)["samples_per_s"]
    return [sps[mine] / sps[rival]]


def verdict(measured, threshold, noise, rival):
    """(what was measured, met) for ratios to `rival` against a threshold: a single ratio by
    the noise band (`judge`); several by their median, within noise when one of them meets it."""
    if len(measured) == 1:
        return f"{measured[0]:.3f}× `{rival}`", judge(measured[0], threshold, noise)
    median = float(np.median(measured))
    met = mark(median >= threshold)
    if median < threshold <= max(measured):
        met = "*within noise*"
    seeds = ", ".join(f"{ratio:.3f}" for ratio in measured)
    return f"median {median:.3f}× `{rival}` over {len(measured)} seeds ({seeds})", met


def judge(ratio, threshold, noise):
    """yes, no, or within noise: short of `threshold` by less than the noise band."""
    if ratio >= threshold:
        return "yes"
    return "*within noise*" if ratio >= threshold * (1 - noise) else "**no**"


def mark(ok):
    return "yes" if ok else "**no**"


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
