"""A cluster file fitted from a real run directory (`dynalloc simulate --fit RUN_DIR`): one group
per rank, so that the simulator can replay the run's machine under any policy.

What each part comes from, in `iterations.csv` after the first iteration (the warm-up), read and
checked by `experiment.run_record` (a directory it cannot use is one line, exit 2):
- Each rank's affine cost of its share, the new-shape fraction and the noise between the ranks:
  `core.costfit` (a warm start from a run directory fits the same), on each rank's busy time
  (`compute_s + data_s`, what the policies balance) over the emulated `slowdown`; the run's
  scenario (config.yaml) is carried over as the groups' slowdowns, so a fitted file replays them
  over time.
- The exchange: each iteration's smallest `sync_s`, the last-arriving rank's, which waits for no
  one: the Allreduce itself. The overhead: `iteration_s` less the slowest busy time and the
  exchange (the optimizer's step, the timings' allgather).

What it cannot see: ranks that share a core (four ranks on the two cores here) slow each other
by how long each computes, which the shares move; it takes each rank as independent.
"""

from pathlib import Path

import numpy as np
import yaml

from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.scenario import Scenario
from dynalloc.core.simulate import project
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_record import read_record
from dynalloc.fsutil import atomic_write


def per_iteration(record):
    """Per iteration after the warm-up: its wall time (the slowest rank's), the slowest busy
    time, the exchange (the smallest sync_s) and what is left (the overhead), as arrays."""
    kept = record.after_warm_up()
    _, group = np.unique(record.iteration[kept], return_inverse=True)

    def per(values, reduce):
        out = np.full(group.max() + 1, -np.inf if reduce is np.maximum else np.inf)
        reduce.at(out, group, values[kept])
        return out

    wall = per(record.iteration_s, np.maximum)
    slowest = per(record.busy, np.maximum)
    exchange = per(record.sync_s, np.minimum)
    return {"iteration_s": wall, "exchange": exchange, "overhead": wall - slowest - exchange}


def measured_mean_s(run_dir):
    """The mean iteration time of a run after its warm-up, as the simulator predicts it."""
    return float(per_iteration(read_record(run_dir))["iteration_s"].mean())


def predicted_mean_s(spec, policy):
    """The mean iteration time that the fitted cluster `spec` projects for `policy` (a run
    config's policy mapping), its first iteration left out as measured_mean_s leaves it."""
    cluster = parse_cluster(spec)
    low, high = cluster.share_bounds()
    built = make_policy(policy, cluster.ranks, cluster.global_batch, low, high)
    return float(project(cluster, built).times[1:].mean())


def fit(run_dir):
    """The cluster file's mapping fitted from the run in `run_dir`."""
    record = read_record(run_dir)
    ranks, config = record.ranks, record.config
    a, c, new_shape, noise = record.costs()
    totals = per_iteration(record)
    try:
        scenario = Scenario(ranks, **_scenario_keys(config.get("scenario") or {}))
    except ValueError as error:
        raise DynallocError(f"{record.path}: config.yaml's scenario: {error}") from None
    highs = config.get("max_share")
    highs = highs if isinstance(highs, list) else [highs] * ranks
    groups = []
    for rank in range(ranks):
        group = {
            "name": f"rank{rank}",
            "count": 1,
            "cost": {"intercept_s": float(a[rank]), "per_sample_s": float(c[rank])},
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
        "global_batch": int(config["global_batch"]),
        "iterations": int(record.iteration.max()) + 1,
        "seed": int(config.get("seed", 0)),
        "min_share": min_share if isinstance(min_share, int) else int(max(min_share)),
        "overhead_s": max(float(totals["overhead"].mean()), 0.0),
        "new_shape": new_shape,
        "network": {"exchange_s": float(totals["exchange"].mean())},
        "groups": groups,
    }
    epochs = record.epoch
    if config.get("iterations") is None or len(np.unique(epochs)) > 1:  # a whole epoch: its size
        spec["dataset_size"] = int(record.batch_size[epochs == epochs.min()].sum())
    if changes:
        spec["changes"] = changes
    return spec


def _scenario_keys(scenario):
    """The scenario's keys a Scenario takes, its per-rank maps already lists (config.yaml)."""
    return {k: v for k, v in scenario.items() if k in ("slowdown", "changes", "jitter")}


def write_fitted(spec, path, run_dir):
    """The fitted cluster file, with a header saying where it comes from."""
    with atomic_write(Path(path)) as handle:
        handle.write(f"# Fitted by `dynalloc simulate --fit {run_dir}`: one group per rank.\n")
        yaml.safe_dump(spec, handle, sort_keys=False)
