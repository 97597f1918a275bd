"""`make bench-warm`: what a warm start buys, in one invocation.

a. Simulated, on a measured heterogeneous 4-GPU profile (config/clusters/lbb-4gpu.yaml: LBB's
   ResNet-18 step times, three fast GPUs and one eight times slower), 5% noise, B = 512, 300
   iterations, ten noise seeds: each policy's whole run, its first iteration included, against
   the exact integer optimum driven through the same noise (`core.simulate.Optimum`); `adaptive`
   cold, warm from the cluster file (tangents at the exact split), and warm from a probe (each
   rank timed as `Allocation.probe` times it, short passes again, its cost added to the run:
   the slowest rank's passes at each of the two shares; the simulator has no framework warm-up,
   whose pass the real probe also makes).
b. Real, on this machine: `make run`'s adaptive run (LeNet, mnist5k, 2 ranks, rank 1 three times
   slower, B = 512, 4 epochs) trained cold, then again warm-started from the cold run's
   directory, then with a probe: each run's first iteration against its steady iterations (the
   median of the full batches after the third), samples/s, and the probe's cost. And `static`
   on the same run, whose split never changes: its first iteration over its steady ones is the
   framework's own first-iteration cost, the floor under any warm start.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
from dynalloc.core.cluster_file import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import Optimum, project
from dynalloc.core.warm import (
    cluster_costs,
    fastest_pass,
    first_probe,
    probe_costs,
    second_probe,
)

BIN = Path(sys.executable).parent
ROOT = Path(__file__).parents[1]
PROFILE = ROOT / "config" / "clusters" / "lbb-4gpu.yaml"
SEEDS = range(10)


def simulated(seeds=SEEDS):
    """Per variant: (whole-run ratios to the optimum, first-iteration ratios, probe seconds)."""
    spec = yaml.safe_load(PROFILE.read_text())
    found = {}
    for seed in seeds:
        cluster = parse_cluster({**spec, "seed": seed})
        best = project(cluster, Optimum(cluster))
        for name, (policy, extra_s) in variants(cluster, seed).items():
            run = project(cluster, policy)
            ratios = found.setdefault(name, ([], [], []))
            ratios[0].append((run.times.sum() + extra_s) / best.times.sum())
            ratios[1].append(run.times[0] / best.times[0])
            ratios[2].append(extra_s)
    return found, float(best.times[len(best.times) // 2 :].mean())


def variants(cluster, seed):
    ranks, batch = cluster.ranks, cluster.global_batch
    out = {name: (make_policy(name, ranks, batch), 0.0) for name in
           ("static", "proportional", "controller", "adaptive")}  # fmt: skip
    warm = make_policy("adaptive", ranks, batch)
    warm.warm(*cluster_costs(cluster))
    out["adaptive, warm from the cluster file"] = (warm, 0.0)
    probed = make_policy("adaptive", ranks, batch)
    rng = np.random.default_rng([seed, 10**6])  # the probe's own noise draws
    sigma = cluster.per_rank([np.sqrt(np.log1p(g.noise**2)) for g in cluster.groups])
    factors = cluster.per_rank(cluster.factors(0))

    def timed(shares):
        """Each rank's seconds at `shares` as Allocation.probe times them (noisy passes, the
        fastest kept), and the slowest rank's time in its passes: the ranks gather after each."""
        found, spent = [], []
        for rank, seconds in enumerate(cluster.seconds(np.asarray(shares)) * factors):
            passes = []

            def one_pass(seconds=seconds, sigma=sigma[rank], passes=passes):
                passes.append(seconds * np.exp(sigma * rng.standard_normal() - sigma**2 / 2))
                return passes[-1]

            found.append(fastest_pass(one_pass))
            spent.append(sum(passes))
        return np.array(found), max(spent)

    first = first_probe(batch, ranks)
    first_s, first_cost = timed(np.full(ranks, first))
    second = second_probe(first, first_s, batch, probed.bounds)
    second_s, second_cost = timed(second)
    probed.warm(*probe_costs(first, second, first_s, second_s))
    out["adaptive, warm from a probe"] = (probed, float(first_cost + second_cost))
    return out


def train(folder, name, dataset, policy):
    config = {
        "dataset": str(dataset), "model": "lenet", "global_batch": 512, "epochs": 4,
        "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9, "wd": 0.0001},
        "policy": policy, "scenario": {"slowdown": [1, 3]}, "seed": 0,
    }  # fmt: skip
    out = folder / name
    shutil.rmtree(out, ignore_errors=True)  # a finished run would be resumed, not trained
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(config))
    command = [str(BIN / "mpiexec"), "-n", "2", str(BIN / "dynalloc"), "train", "--config",
               str(folder / f"{name}.yaml"), "--out", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return out


def first_and_steady(run):
    rows = np.genfromtxt(run / "iterations.csv", delimiter=",", names=True, dtype=None,
                         encoding="utf-8")  # fmt: skip
    per = {}
    for row in rows:
        per.setdefault(int(row["iteration"]), []).append(row)
    walls = np.array([max(r["iteration_s"] for r in per[i]) for i in sorted(per)])
    full = np.array([sum(r["batch_size"] for r in per[i]) == 512 for i in sorted(per)])
    steady = float(np.median(walls[3:][full[3:]]))
    shares = [int(r["batch_size"]) for r in per[0]]
    metrics = json.loads((run / "metrics.json").read_text())
    return walls[0], steady, shares, metrics


def real(dataset, folder, repeats):
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for repeat in range(repeats):
        cold = train(folder, f"cold{repeat}", dataset, {"name": "adaptive"})
        runs = {
            "adaptive, cold": cold,
            "adaptive, warm from the cold run": train(
                folder, f"warm{repeat}", dataset, {"name": "adaptive", "warm_start": str(cold)}
            ),
            "adaptive, warm from a probe": train(
                folder, f"probe{repeat}", dataset, {"name": "adaptive", "warm_start": "probe"}
            ),
            "static (one split throughout: the framework's own)": train(
                folder, f"static{repeat}", dataset, {"name": "static"}
            ),
        }
        for name, run in runs.items():
            first, steady, shares, metrics = first_and_steady(run)
            probe = metrics.get("probe_s", 0.0)
            lines.append(
                f"| {repeat} | {name} | {first:.3f} s | {steady:.3f} s | {first / steady:.2f} "
                f"| {shares} | {metrics['samples_per_s']:,.0f} | "
                + (f"{1e3 * probe:.0f} ms ({probe / steady:.2f} iterations)" if probe else "–")
                + " |"
            )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, help="mnist5k, staged: part b on this machine")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-warm")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    found, optimum_s = simulated()
    print("## a. Simulated: LBB's measured 4-GPU profile, 5% noise, B = 512, 300 iterations, "
          f"{len(SEEDS)} seeds\n")  # fmt: skip
    print("| policy | whole run / optimum, median (range) | first iteration / optimum's | "
          "probe |\n|---|---|---|---|")  # fmt: skip
    for name, (whole, first, extra) in found.items():
        probe = f"{1e3 * np.median(extra):.0f} ms ({np.median(extra) / optimum_s:.1f} " \
                "iterations)" if max(extra) else "–"  # fmt: skip
        print(f"| {name} | {np.median(whole):.4f} ({min(whole):.4f}-{max(whole):.4f}) | "
              f"{np.median(first):.2f} | {probe} |")  # fmt: skip
    if args.dataset is not None:
        print(f"\n## b. This machine: make run's adaptive run, {args.repeats} repeats\n")
        print(
            "| repeat | run | first iteration | steady iteration | first / steady | "
            "first shares | samples/s | probe |\n|---|---|---|---|---|---|---|---|"
        )
        print("\n".join(real(args.dataset, args.out, args.repeats)))


if __name__ == "__main__":
    main()
