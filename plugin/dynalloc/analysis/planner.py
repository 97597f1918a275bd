"""`dynalloc simulate`: what each policy would give on a cluster before spending its hours.

Every policy of `--policies` (the very objects training runs, `make_policy`) is driven through a
modelled cluster (`dynalloc.core.cluster`: a cluster file, or one fitted from a real run with
`--fit`), beside the exact optimum as the ceiling (`dynalloc.core.simulate.project`). Sweeps
resize the cluster (`--sizes`: every group's count times each factor, the global batch with
them) and stretch its heterogeneity (`--heterogeneity`: each group's slowness over the fastest,
s, becomes 1 + h (s - 1)). One row per (cluster, sweep point, policy), printed and written as CSV;
plots of the speedup over `static` against each sweep.
"""

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from dynalloc.analysis import fit, planplots
from dynalloc.analysis.compare import table_page
from dynalloc.analysis.replay import add_policy_arguments, parse_params
from dynalloc.analysis.runs import load_run
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import Optimum, project
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config
from dynalloc.fsutil import atomic_write

COLUMNS = ("cluster", "sweep", "value", "ranks", "global_batch", "iterations", "policy", "mean_s",
           "steady_s", "samples_per_s", "wait_fraction", "split_changes", "speedup",
           "vs_optimum")  # fmt: skip


TITLE = "Planner: every policy on each modelled cluster, the optimum as the ceiling"
BLOCKS = ("cluster", "sweep", "value")  # a rule above each cluster's sweep point


def add_arguments(parser):
    parser.add_argument(
        "cluster", nargs="*", type=Path, metavar="CLUSTER.yaml",
        help="cluster files (config/clusters/example.yaml documents one)",
    )  # fmt: skip
    parser.add_argument(
        "--fit", type=Path, metavar="RUN_DIR",
        help="also a cluster fitted from a run of dynalloc train (one group per rank)",
    )  # fmt: skip
    parser.add_argument(
        "--save-fit", type=Path, metavar="FILE", help="write the fitted cluster file here"
    )
    add_policy_arguments(parser, "drive (static always)")
    parser.add_argument(
        "--sizes", nargs="+", type=float, default=[], metavar="FACTOR",
        help="also each group's count times each factor, e.g. 1 8 64",
    )  # fmt: skip
    parser.add_argument(
        "--heterogeneity", nargs="+", type=float, default=[], metavar="H",
        help="also each group's slowness s over the fastest made 1 + H (s - 1), e.g. 0 1 2 4",
    )  # fmt: skip
    parser.add_argument(
        "--iterations", type=int, metavar="N", help="iterations instead of the files' own"
    )
    parser.add_argument("--out", type=Path, help="write the rows here (CSV)")
    parser.add_argument("--html", type=Path, help="and as a page for the report (HTML)")
    parser.add_argument("--plots-dir", type=Path, help="write the sweeps' plots here (PNG)")


def run(args):
    if not args.cluster and args.fit is None:
        raise DynallocError("give a cluster file, or --fit RUN_DIR")
    if args.save_fit is not None and args.fit is None:
        raise DynallocError("--save-fit needs --fit RUN_DIR")
    for flag, values in (("--sizes", args.sizes), ("--heterogeneity", args.heterogeneity)):
        low = 0.0 if flag == "--heterogeneity" else 1e-9
        bad = [v for v in values if not (math.isfinite(v) and v >= low)]
        if bad:
            raise DynallocError(f"{flag} {bad[0]:g}: must be a finite number > 0 (sizes) or >= 0")
    if args.iterations is not None and args.iterations < 1:
        raise DynallocError(f"--iterations must be at least 1, got {args.iterations}")
    policies = ["static", *[p for p in args.policies if p != "static"]]
    if "oracle" in policies:
        raise DynallocError("oracle needs the speeds in advance: the optimum row is the ceiling")
    params = parse_params(args.param, policies)
    clusters = [(path.stem, load_cluster(path)) for path in args.cluster]
    if args.fit is not None:
        spec = fit.fit(args.fit)
        if args.save_fit is not None:
            fit.write_fitted(spec, args.save_fit, args.fit)
        name = load_run(args.fit).name  # the pipeline's run name, not its folder `train`
        clusters.append((name, checked(spec, f"fitted from {args.fit}")))
    if args.iterations is not None:
        clusters = [(name, replace(c, iterations=args.iterations)) for name, c in clusters]
    table = pd.DataFrame(
        [row for name, cluster in clusters for row in plan(name, cluster, args, policies, params)],
        columns=COLUMNS,
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(args.out, newline="") as handle:
            table.to_csv(handle, index=False)
    if args.html is not None:
        with atomic_write(args.html) as handle:
            handle.write(table_page(table, "simulate", TITLE, BLOCKS, ("iterations",)))
    if args.plots_dir is not None:
        args.plots_dir.mkdir(parents=True, exist_ok=True)
        planplots.plot_sweeps(table, args.plots_dir)
    print(table.to_string(index=False, float_format=shown))


def shown(value):
    """A number as the printed table shows it: whole from 100 up, else 4 significant digits."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.4g}"


def load_cluster(path):
    """The Cluster in the cluster file `path`; DynallocError names the file and the key."""
    return checked(load_config(path), f"cluster file {path}")


def checked(spec, where):
    try:
        return parse_cluster(spec)
    except ValueError as error:
        raise DynallocError(f"{where}: {error}") from None


def plan(name, cluster, args, policies, params):
    """The rows of one cluster: as given, then at each size and each heterogeneity."""
    points = [("cluster", 1.0, cluster)]
    points += [("size", s, cluster.resized(s)) for s in args.sizes]
    points += [("heterogeneity", h, cluster.stretched(h)) for h in args.heterogeneity]
    for sweep, value, modelled in points:
        yield from compare(name, sweep, value, modelled, policies, params)


def compare(name, sweep, value, cluster, policies, params):
    """One row per policy and one for the optimum on `cluster`."""
    low, high = cluster.share_bounds()
    projected = []
    try:
        for policy in policies:
            spec = {"name": policy, **params.get(policy, {})}
            built = make_policy(spec, cluster.ranks, cluster.global_batch, low, high)
            projected.append(project(cluster, built))
        projected.append(project(cluster, Optimum(cluster)))
    except ValueError as error:
        raise DynallocError(f"cluster {name} ({sweep} {value:g}): {error}") from None
    static, optimum = projected[0], projected[-1]
    for p in projected:
        yield {
            "cluster": name, "sweep": sweep, "value": value, "ranks": cluster.ranks,
            "global_batch": cluster.global_batch, "iterations": cluster.iterations,
            "policy": p.policy, "mean_s": p.mean_s(),
            "steady_s": p.steady_s(), "samples_per_s": p.samples_per_s(),
            "wait_fraction": p.wait_fraction, "split_changes": p.split_changes,
            "speedup": static.times.sum() / p.times.sum(),
            "vs_optimum": p.steady_s() / optimum.steady_s(),
        }  # fmt: skip
