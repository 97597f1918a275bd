"""A cluster file fitted from a real run directory (`dynalloc simulate --fit RUN_DIR`): one group
per rank, so that the simulator can replay the run's machine under any policy.

What each part comes from, in `iterations.csv` after the first iteration (MXNet's warm-up):
- A rank's own speed: its busy time (`compute_s + data_s`, what the policies balance) divided by
  the emulated `slowdown` the row ran under; the run's scenario (config.yaml) is carried over as
  the groups' slowdowns, so a fitted file replays them over time.
- Its affine cost `a + c b`: least squares of its own times against its shares, on the rows of
  shares it had computed before (a new share pays MXNet's memory planning once, `new_shape`).
  A run that never moved its shares (`static`, or `adaptive` on identical ranks) leaves one share
  per rank, plus the epoch's smaller last batch; then one intercept fraction is pooled across the
  ranks from those last batches, corrected for the new shape they are.
- Noise: the spread of the log residuals once each iteration's mean over the ranks is removed. A
  slowdown that all ranks share (the machine's other load) makes no rank wait and moves no
  policy (each divides it out), so only what differs between ranks is modelled.
- The exchange: each iteration's smallest `sync_s`, the last-arriving rank's, which waits for no
  one: the Allreduce itself. The overhead: `iteration_s` less the slowest busy time and the
  exchange (the optimizer's step, the timings' allgather).
- `new_shape`: the median excess, over the affine fit, of a rank's first computation of a share
  (runs that move shares); runs that never move fall back to DEFAULT_NEW_SHAPE.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dynalloc.analysis.runs import load_run
from dynalloc.core.cluster import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.scenario import Scenario
from dynalloc.core.simulate import project
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

# LeNet's new share on one CPU core costs 4-11% more than a share seen before
# (benchmarks/new_shape.py); used when a run shows no new share outside its last batches.
DEFAULT_NEW_SHAPE = 0.07
MIN_NEW_ROWS = 4  # first computations of a share needed to measure new_shape from a run


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
            "cost": {"intercept_s": a, "per_sample_s": c},
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
    if config.get("iterations") is None:  # whole epochs: their size, and their last batch
        first = run.iterations["epoch"] == run.iterations["epoch"].min()
        spec["dataset_size"] = int(run.iterations.loc[first, "batch_size"].sum())
    if changes:
        spec["changes"] = changes
    return spec


def _scenario_keys(scenario):
    """The scenario's keys a Scenario takes, its per-rank maps already lists (config.yaml)."""
    return {k: v for k, v in scenario.items() if k in ("slowdown", "changes", "jitter")}


def _costs(table, ranks):
    """Per rank (a, c), and the new-shape fraction."""
    seen = table[~table["new"]]
    spread = seen.groupby("rank")["batch_size"].agg(lambda b: b.max() - b.min())
    moved = len(spread) == ranks and bool((spread >= 0.1 * seen["batch_size"].median()).all())
    if moved:
        costs = {r: _affine(g["batch_size"], g["own"]) for r, g in seen.groupby("rank")}
        firsts = table[table["new"]]
        new_shape = DEFAULT_NEW_SHAPE
        if len(firsts) >= MIN_NEW_ROWS:
            a = firsts["rank"].map(lambda r: costs[r][0])
            c = firsts["rank"].map(lambda r: costs[r][1])
            excess = firsts["own"] / (a + c * firsts["batch_size"])
            new_shape = max(float(np.median(excess)) - 1.0, 0.0)
        return costs, new_shape
    return _pooled(table, ranks), DEFAULT_NEW_SHAPE


def _affine(shares, seconds):
    """Least-squares (a, c) of seconds = a + c * share, the intercept held at 0 or above (a
    negative one predicts negative times for small shares)."""
    b, t = np.asarray(shares, float), np.asarray(seconds, float)
    c, a = np.polyfit(b, t, 1)
    if a < 0 or c <= 0:
        a, c = 0.0, float(b @ t / (b @ b))
    return float(a), float(c)


def _pooled(table, ranks):
    """(a, c) per rank from runs whose shares stayed put: each rank's mean time at its usual
    share, split into intercept and per-sample parts by one intercept fraction pooled from the
    ranks' last-batch times (taken as new shapes: divided by 1 + DEFAULT_NEW_SHAPE)."""
    usual = table.groupby("rank")["batch_size"].agg(lambda b: b.mode().iloc[0])
    level = {
        r: float(g.loc[g["batch_size"] == usual[r], "own"].mean()) for r, g in table.groupby("rank")
    }
    other = table[table["batch_size"] != table["rank"].map(usual)]
    fractions = []
    for _, row in other.iterrows():
        full, share = level[row["rank"]], usual[row["rank"]]
        x = row["batch_size"] / share
        observed = row["own"] / (1 + DEFAULT_NEW_SHAPE) / full
        fractions.append((observed - x) / (1 - x))  # observed = f + (1 - f) x
    fraction = float(np.clip(np.median(fractions), 0.0, 0.9)) if fractions else 0.0
    return {r: (fraction * level[r], (1 - fraction) * level[r] / usual[r]) for r in range(ranks)}


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
