"""The simulator against the bench's real runs, then beyond them (`make bench-simulate`):

1. validation.csv: every run of `make bench` (dist_sync aside) fitted (`dynalloc simulate
   --fit`) and its own policy driven through the fit: predicted against measured mean iteration
   time, the warm-up left out of both;
2. speedups.csv: per scenario, `adaptive`'s speedup over `static` as measured (their two runs)
   and as predicted from each of the two runs' fits alone;
3. projections.csv: the planner's rows for the projection cluster at 64, 512 and 4,096 ranks;
4. speed.csv: seconds per policy for 1,000 iterations of 4,096 ranks (`static`'s is the
   engine's own share, the rest is the policy's update).

    .venv-workflow/bin/python benchmarks/bench_simulate.py --results results/bench \
        --clusters config/clusters/projection.yaml --out results/bench-simulate

Without --results, only the projections and the speed (no bench needed).

Runs in the workflow environment; benchmarks/report.py sets the tables in BENCHMARKS.md.
"""

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
from dynalloc.analysis import benchstats, fit, planner
from dynalloc.analysis.runs import load_run
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import Optimum, project
from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write

POLICIES = ["static", "proportional", "controller", "adaptive"]  # dbs: static without epochs
SIZES = [1, 8, 64]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", type=Path, help="results of make bench (without: projections and speed only)"
    )
    parser.add_argument("--clusters", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--speed-ranks", type=int, default=4096)
    parser.add_argument("--speed-iterations", type=int, default=1000)
    args = parser.parse_args()
    try:
        tables = {}
        if args.results is not None:
            fitted = validation(args.results)
            tables["validation"] = fitted.drop(columns="spec")
            tables["speedups"] = speedups(fitted)
        tables["projections"] = projections(args.clusters)
        tables["speed"] = speed(args.clusters[0], args.speed_ranks, args.speed_iterations)
    except DynallocError as error:
        sys.exit(f"error: {error}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        with atomic_write(args.out / f"{name}.csv", newline="") as handle:
            table.to_csv(handle, index=False)
        print(f"{name}:\n{table.to_string(index=False, float_format='%.4g')}\n")


def validation(results):
    """Per run: its fit's prediction of its own mean iteration time."""
    rows = []
    for record in benchstats.load(results).itertuples():
        if record.policy == "dist_sync":
            continue  # MXNet's parameter server: no policy, no run directory of ours
        run_dir = benchstats.train_dir(results, record.run)
        spec = fit.fit(run_dir)
        policy = load_run(run_dir).config["policy"]
        rows.append(
            {
                "run": record.run,
                "model": record.model,
                "scenario": record.scenario,
                "ranks": record.ranks,
                "policy": record.policy,
                "measured_s": fit.measured_mean_s(run_dir),
                "predicted_s": fit.predicted_mean_s(spec, policy),
                "spec": spec,
            }
        )
    table = pd.DataFrame(rows)
    table["error"] = table["predicted_s"] / table["measured_s"] - 1
    return table


def speedups(validation):
    """Per (model, scenario) with both runs: adaptive over static, measured and predicted from
    each run's fit."""
    rows = []
    for (model, scenario), runs in validation.groupby(["model", "scenario"], sort=False):
        runs = runs.set_index("policy")
        if not {"static", "adaptive"} <= set(runs.index):
            continue
        row = {"model": model, "scenario": scenario, "ranks": runs.loc["static", "ranks"]}
        row["measured"] = runs.loc["static", "measured_s"] / runs.loc["adaptive", "measured_s"]
        for source in ("static", "adaptive"):
            spec = runs.loc[source, "spec"]
            static = fit.predicted_mean_s(spec, {"name": "static"})
            adaptive = fit.predicted_mean_s(spec, {"name": "adaptive"})
            row[f"from_{source}"] = static / adaptive
            row[f"from_{source}_error"] = row[f"from_{source}"] / row["measured"] - 1
        rows.append(row)
    return pd.DataFrame(rows)


def projections(clusters):
    """The planner's rows at every size of SIZES."""
    rows = []
    for path in clusters:
        cluster = planner.load_cluster(path)
        for size in SIZES:
            rows += planner.compare(path.stem, "size", size, cluster.resized(size), POLICIES, {})
    return pd.DataFrame(rows)


def speed(path, ranks, iterations):
    """Seconds each policy (and the optimum) takes through `iterations` iterations of the
    cluster in `path` grown to `ranks` ranks."""
    base = planner.load_cluster(path)
    cluster = replace(base.resized(ranks / base.ranks), iterations=iterations)
    low, high = cluster.share_bounds()
    rows = []
    for name in [*POLICIES, "dbs", "optimum"]:
        began = time.perf_counter()
        if name == "optimum":
            policy = Optimum(cluster)
        else:
            policy = make_policy(name, cluster.ranks, cluster.global_batch, low, high)
        project(cluster, policy)
        rows.append(
            {"policy": name, "ranks": cluster.ranks, "iterations": iterations,
             "seconds": time.perf_counter() - began}
        )  # fmt: skip
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
