"""What one policy update costs: every rank runs it after every iteration, on the critical path.

Simulated ranks, global batch 32 per rank, half the ranks twice as slow, 5% noise; for each
policy and rank count, the median wall time of `Policy.update` in milliseconds. Targets (issue
20): `adaptive` at most 2 ms and every other policy at most 1 ms at 4,096 ranks.

    .venv-train/bin/python benchmarks/policy_update.py [--baseline CHECKOUT]

`--baseline` times the policies of another checkout too (e.g. a `git worktree` of an older
commit), each measurement alternating with this checkout's in its own process, so that the two
columns share the machine's state and their ratio holds where the absolute figures drift.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RANKS = (4, 64, 512, 4096)
POLICIES = ("static", "proportional", "dbs", "controller", "adaptive")
TARGETS = {"adaptive": 2.0}  # ms at 4,096 ranks; the other policies: 1.0


def median_update_ms(name, ranks, updates, repeats=3):
    """Median over `repeats` runs of `updates` updates each (seeds 0, 1, ...)."""
    from dynalloc.core.policies import make_policy

    spent = []
    for seed in range(repeats):
        policy = make_policy(name, ranks, 32 * ranks)
        rng = np.random.default_rng(seed)
        speed = np.where(np.arange(ranks) < ranks // 2, 1.0, 2.0)
        shares = policy.shares
        for iteration in range(1, updates + 1):
            seconds = (0.012 + 0.001 * shares * speed) * rng.uniform(0.95, 1.05, ranks)
            started = time.perf_counter()
            shares = policy.update(shares, seconds, iteration, 0)
            spent.append(time.perf_counter() - started)
    return 1000 * float(np.median(spent))


def measure(checkout, name, ranks, updates):
    """`median_update_ms` in a fresh process that imports the plugin of `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(Path(checkout) / "plugin"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--one", name, str(ranks), str(updates)]
    return float(
        subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # name, ranks, updates
    args = parser.parse_args()
    if args.one:
        name, ranks, updates = args.one
        print(median_update_ms(name, int(ranks), int(updates)))
        return
    here = Path(__file__).resolve().parent.parent
    checkouts = {"now": here} | ({"baseline": args.baseline} if args.baseline else {})
    figures = {}
    for ranks in RANKS:
        updates = 200 if ranks < 4096 else 60
        for name in POLICIES:
            for label, checkout in checkouts.items():
                figures[label, name, ranks] = measure(checkout, name, ranks, updates)
                figure = figures[label, name, ranks]
                print(f"{label:8s} {name:12s} {ranks:5d} ranks {figure:9.3f} ms", file=sys.stderr)
    header = "| ranks | " + " | ".join(f"`{name}`" for name in POLICIES) + " |"
    print(header + "\n|---|" + "---|" * len(POLICIES))
    for ranks in RANKS:
        cells = []
        for name in POLICIES:
            now = figures["now", name, ranks]
            cell = f"{now:.3f} ms"
            if args.baseline:
                before = figures["baseline", name, ranks]
                cell += f" ({before:.3f} ms before, {before / now:.1f}x)"
            cells.append(cell)
        print(f"| {ranks:,} | " + " | ".join(cells) + " |")
    missed = [
        f"{name} {figures['now', name, 4096]:.3f} ms > {TARGETS.get(name, 1.0)} ms"
        for name in POLICIES
        if figures["now", name, 4096] > TARGETS.get(name, 1.0)
    ]
    print("\ntargets at 4,096 ranks: " + ("MISSED: " + ", ".join(missed) if missed else "met"))


if __name__ == "__main__":
    main()
