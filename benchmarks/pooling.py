"""What pooling short iterations (`pool_s`, `core.policy`) does to `adaptive`: simulated pairs of
ranks, 400 iterations of about 1, 2 and 9 ms under +-30% jitter, equal or one three times
slower, 10 seeds; moves of the split (median, max) and total time (the slowest rank's, summed)
with the default pooling over the same without it (`pool_s: 0`, an update after every
iteration), on the same draws.

    .venv-train/bin/python benchmarks/pooling.py
"""

import numpy as np
from dynalloc.core.policies import make_policy
from dynalloc.core.policy import POOL_S
from dynalloc.core.simulate import simulate

ITERATIONS, SEEDS, BATCH, NOISE = 400, 10, 64, 0.3
SCENARIOS = [  # (label, intercept and per-sample seconds of rank 0, rank 1's slowdown)
    ("1 ms, equal ranks", 2e-4, 2.5e-5, 1.0),
    ("1-2 ms, 1:3", 2e-4, 2.5e-5, 3.0),
    ("9 ms, equal ranks", 1e-3, 2.5e-4, 1.0),
    ("9-17 ms, 1:3", 1e-3, 2.5e-4, 3.0),
]


def run(intercept, slope, slowdown, pool_s, seed):
    policy = make_policy({"name": "adaptive", "pool_s": pool_s}, 2, BATCH)
    trace = simulate(policy, [intercept] * 2, [slope, slope * slowdown], ITERATIONS, NOISE, seed)
    moves = int(np.count_nonzero(np.any(np.diff(trace.shares, axis=0), axis=1)))
    return moves, float(trace.true_times.max(axis=1).sum())


def main():
    print(f"{'scenario':20s} {'moves pooled':14s} {'moves, pool_s 0':16s} time pooled / pool_s 0")
    for label, intercept, slope, slowdown in SCENARIOS:
        pooled = [run(intercept, slope, slowdown, POOL_S, seed) for seed in range(SEEDS)]
        alone = [run(intercept, slope, slowdown, 0.0, seed) for seed in range(SEEDS)]
        cells = [f"{int(np.median(m))}, {max(m)}" for m in ([p[0] for p in pooled],
                                                          [a[0] for a in alone])]  # fmt: skip
        ratio = sum(p[1] for p in pooled) / sum(a[1] for a in alone)
        print(f"{label:20s} {cells[0]:14s} {cells[1]:16s} {ratio:.4f}x")


if __name__ == "__main__":
    main()
