"""A run's `policy.warm_start` (`experiment.warm_spec`) resolved into the costs it starts from.

Every policy starts from the equal split and learns the ranks' speeds from the iterations, which
on a cluster of unequal nodes makes the first iteration the slowest of the run (six times the
optimum on LBB's measured 4-GPU profile). Often the speeds are known before the run starts: a
previous run's directory (its costs fitted as `simulate --fit` fits them) or a cluster file's
ranks; each is resolved here into the costs form (plain numbers, `Policy.warm`). The probe is the
runtime's (`runtime.common.allocation`). A warm start changes where the shares begin, never the
SGD: the sample order and each rank's weight in the gradient stay what they are.
"""

import math
from pathlib import Path

import numpy as np

from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.warm import cluster_costs
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config
from dynalloc.experiment.run_record import read_record
from dynalloc.experiment.warm_spec import COSTS, costs_form


def warm_costs(value, ranks, config=None, factors=None):
    """The costs form of a checked `warm_start` (not the probe) for `ranks` ranks; `config`, the
    run config of the run to start (a run directory's model and framework must be its own);
    `factors`: each rank's emulated slowdown at the first iteration, which the fitted costs (each
    rank's own) take on."""
    if isinstance(value, str):
        costs = {**_from_run(Path(value), config, ranks), "source": value}
    elif "cluster" in value:
        costs = {**_from_cluster(value["cluster"], ranks), "source": value["cluster"]}
    else:
        costs = value
    if factors is not None:
        scale = np.asarray(factors, dtype=float)
        costs = {**costs, **{k: (scale * np.asarray(costs[k])).tolist() for k in COSTS}}
    return costs_form(costs, ranks)


def _from_run(path, config, ranks):
    if not (path / "iterations.csv").is_file():
        raise DynallocError(f"policy.warm_start: {path} is not a run directory (no iterations.csv)")
    record = read_record(path)
    if record.ranks != ranks:
        raise DynallocError(
            f"policy.warm_start: {path} ran on {record.ranks} ranks, this run has {ranks}; "
            "warm-start from a run of as many ranks"
        )
    for key in ("model", "framework") if config is not None else ():
        theirs, mine = record.config.get(key, "mxnet" if key == "framework" else None), config[key]
        if theirs != mine:
            raise DynallocError(
                f"policy.warm_start: {path} trained {key} {theirs!r}, this run {mine!r}: its "
                "costs are another network's"
            )
    a, c, _, noise = record.costs()
    return {"intercept_s": a.tolist(), "per_sample_s": c.tolist(),
            **({"noise": noise} if math.isfinite(noise) else {})}  # fmt: skip


def _from_cluster(path, ranks):
    try:
        cluster = parse_cluster(load_config(path))
    except ValueError as error:
        raise DynallocError(f"policy.warm_start: cluster file {path}: {error}") from None
    if cluster.ranks != ranks:
        raise DynallocError(
            f"policy.warm_start: cluster file {path} has {cluster.ranks} ranks, this run {ranks}"
        )
    a, c = cluster_costs(cluster)
    noise = float(np.mean([g.noise for g in cluster.groups]))
    return {"intercept_s": a.tolist(), "per_sample_s": c.tolist(), "noise": noise}
