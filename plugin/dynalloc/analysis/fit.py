"""A cluster file fitted from a real run directory (`dynalloc simulate --fit RUN_DIR`): one group
per rank, so that the simulator can replay the run's machine under any policy.

What each part comes from, in `iterations.csv` after the first iteration (MXNet's warm-up):
- A rank's own speed: its busy time (`compute_s + data_s`, what the policies balance) divided by
  the emulated `slowdown` the row ran under; the run's scenario (config.yaml) is carried over as
  the groups' slowdowns, so a fitted file replays them over time.
- Its affine cost `a + c b`: the rank's mean time over its mean share (on the rows of shares it
  had computed before: a new share pays MXNet's memory planning once, `new_shape`), split into
  intercept and per-sample cost by one intercept fraction for all ranks, fitted by least squares
  to every rank's times against its shares, each over its means. Why one fraction: a rank's own
  shares move too little to tell its intercept from its slope (measured on the bench's adaptive
  runs: slopes of 0.1 to 5 ms a sample for one LeNet), while the emulated slowdowns and a kind of
  node scale a rank's whole cost. A run that never moved its shares (`static`, or `adaptive` on
  identical ranks) has only the epochs' smaller last batches to tell the fraction, most of them
  new shapes, divided by 1 + DEFAULT_NEW_SHAPE.
- Noise: the spread of the log residuals once each iteration's mean over the ranks is removed. A
  slowdown that all ranks share (the machine's other load) makes no rank wait and moves no
  policy (each divides it out), so only what differs between ranks is modelled.
- The exchange: each iteration's smallest `sync_s`, the last-arriving rank's, which waits for no
  one: the Allreduce itself. The overhead: `iteration_s` less the slowest busy time and the
  exchange (the optimizer's step, the timings' allgather).
- `new_shape`: the median excess, over the fitted cost, of a rank's first computation of a share
  (runs that move shares); runs that never move fall back to DEFAULT_NEW_SHAPE.

What it cannot see: ranks that share a core (four ranks on the two cores here) slow each other
by how long each computes, which the shares move; it takes each rank as independent.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dynalloc.analysis.runs import load_run
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.scenario import Scenario
from dynalloc.core.simulate import project
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

# LeNet's new share on one CPU core costs 4-11% more than a share seen before
# (benchmarks/new_shape.py); used when a run shows no new share outside its last batches.
DEFAULT_NEW_SHAPE = 0.07
MIN_NEW_ROWS = 4  # first computations of a share needed to measure new_shape from a run
# The spread of the shares seen before (over each rank's mean) from which they tell the intercept
# from the per-sample cost; below it, only the epochs' last batches differ.
MIN_SPREAD = 0.05


def rows(run):
    """The run's iterations after the warm-up, with `busy`, `own` (busy over the emulated
    slowdown) and `new` (the rank's first computation of that share, warm-up included)."""
    table = run.iterations.sort_values(["iteration", "rank"])
    new = ~table.duplicated(["rank", "batch_size"])
    table = table.assign(busy=table["compute_s"] + table["data_s"], new=new)
    table = table.assign(own=table["busy"] / table["slowdown"])
    return table[table["iteration"] > table["iteration"].min()]


def per_iteration(table):
    """Per iteration: its wall time (the slowest rank's), the slowest busy time, the exchange
    (the smallest sync_s) and what is left (the overhead)."""
    grouped = table.groupby("iteration")
    frame = pd.DataFrame(
        {
            "iteration_s": grouped["iteration_s"].max(),
            "slowest": grouped["busy"].max(),
            "exchange": grouped["sync_s"].min(),
        }
    )
    return frame.assign(overhead=frame["iteration_s"] - frame["slowest"] - frame["exchange"])


def measured_mean_s(run_dir):
    """The mean iteration time of a run after its warm-up, as the simulator predicts it."""
    return float(per_iteration(rows(load_run(run_dir)))["iteration_s"].mean())


def predicted_mean_s(spec, policy):
    """The mean iteration time that the fitted cluster `spec` projects for `policy` (a run
    config's policy mapping), its first iteration left out as measured_mean_s leaves it."""
    cluster = parse_cluster(spec)
    low, high = cluster.share_bounds()
    built = make_policy(policy, cluster.ranks, cluster.global_batch, low, high)
    return float(project(cluster, built).times[1:].mean())


def fit(run_dir):
    """The cluster file's mapping fitted from the run in `run_dir`."""
    run = load_run(run_dir)
    table = rows(run)
    if table.empty:
        raise DynallocError(f"{run_dir}: no iteration after the warm-up to fit")
    ranks = int(table["rank"].max()) + 1
    config = run.config
    costs, new_shape = _costs(table, ranks)
    noise = _noise(table, costs)
    totals = per_iteration(table)
    scenario = Scenario(ranks, **_scenario_keys(config.get("scenario") or {}))
    highs = config.get("max_share")
    highs = highs if isinstance(highs, list) else [highs] * ranks
    groups = []
    for rank in range(ranks):
        a, c = costs[rank]
        group = {
            "name": f"rank{rank}",
            "count": 1,
            "cost": {"intercept_s": float(a), "per_sample_s": float(c)},
            "noise": noise,
            "slowdown": scenario.slowdown[rank],
            "jitter": scenario.jitter,
        }
        if highs[rank] is not None:
            group["max_share"] = int(highs[rank])
        groups.append(group)
    changes = [
        {"group": f"rank{c.rank}", "start": c.start, "end": c.end,
         "factor": c.factor if c.mode == "sleep" else float(1 + c.processes)}
        for c in scenario.changes if c.mode in ("sleep", "contention")
    ]  # fmt: skip
    min_share = config.get("min_share", 1)
    spec = {
        "global_batch": int(run.metrics["global_batch"]),
        "iterations": int(table["iteration"].max()) + 1,
        "seed": int(config.get("seed", 0)),
        "min_share": min_share if isinstance(min_share, int) else int(max(min_share)),
        "overhead_s": max(float(totals["overhead"].mean()), 0.0),
        "new_shape": new_shape,
        "network": {"exchange_s": float(totals["exchange"].mean())},
        "groups": groups,
    }
    epochs = run.iterations["epoch"]
    if config.get("iterations") is None or epochs.nunique() > 1:  # a whole epoch: its size
        spec["dataset_size"] = int(run.iterations.loc[epochs == epochs.min(), "batch_size"].sum())
    if changes:
        spec["changes"] = changes
    return spec


def _scenario_keys(scenario):
    """The scenario's keys a Scenario takes, its per-rank maps already lists (config.yaml)."""
    return {k: v for k, v in scenario.items() if k in ("slowdown", "changes", "jitter")}


def _costs(table, ranks):
    """Per rank (a, c), and the new-shape fraction: each rank's mean time over its mean share
    (of the shares it had seen before) split by one intercept fraction for all ranks."""
    seen = table[~table["new"]]
    share = seen.groupby("rank")["batch_size"].mean()
    level = seen.groupby("rank")["own"].mean()
    if len(share) < ranks:
        raise DynallocError("a rank has no iteration at a share it computed before: nothing to fit")
    x = table["batch_size"] / table["rank"].map(share)  # share and time over the rank's means
    y = table["own"] / table["rank"].map(level)
    moved = float(x[~table["new"]].std()) >= MIN_SPREAD if len(seen) > 1 else False
    new_shape = DEFAULT_NEW_SHAPE
    if moved:  # the shares the ranks had seen before tell the fraction; the new ones, new_shape
        fraction = _fraction(x[~table["new"]], y[~table["new"]])
        new = table["new"]
        if new.sum() >= MIN_NEW_ROWS:
            excess = y[new] / (fraction + (1 - fraction) * x[new])
            new_shape = max(float(excess.median()) - 1.0, 0.0)
    else:  # only the epochs' last batches differ, most of them new shapes
        fraction = _fraction(x, y / (1 + DEFAULT_NEW_SHAPE * table["new"]))
    return {
        r: (fraction * level[r], (1 - fraction) * level[r] / share[r]) for r in range(ranks)
    }, new_shape


def _fraction(x, y):
    """The intercept fraction f of y = f + (1 - f) x by least squares (x, y: share and time
    over their means), within [0, 0.9]; 0 where the shares never differ."""
    lever = 1.0 - x
    if float((lever**2).sum()) == 0.0:
        return 0.0
    return float(np.clip(((y - x) * lever).sum() / (lever**2).sum(), 0.0, 0.9))


def _noise(table, costs):
    """Relative standard deviation of what differs between ranks in an iteration."""
    seen = table[~table["new"]]
    a = seen["rank"].map(lambda r: costs[r][0])
    c = seen["rank"].map(lambda r: costs[r][1])
    residual = np.log(seen["own"] / (a + c * seen["batch_size"]))
    centred = residual - residual.groupby(seen["iteration"]).transform("mean")
    ranks = seen.groupby("iteration")["rank"].transform("count")
    usable = ranks > 1
    variance = float((centred[usable] ** 2 * ranks[usable] / (ranks[usable] - 1)).mean())
    return float(np.sqrt(np.expm1(variance)))


def write_fitted(spec, path, run_dir):
    """The fitted cluster file, with a header saying where it comes from."""
    with atomic_write(Path(path)) as handle:
        handle.write(f"# Fitted by `dynalloc simulate --fit {run_dir}`: one group per rank.\n")
        yaml.safe_dump(spec, handle, sort_keys=False)
