"""What one-iteration spikes (a rank's time 2.2-3x for one iteration: a preempted core, a garbage
collection, a slow read) cost `adaptive`: simulated equal ranks under +-10% noise, 300
iterations, 20 seeds; its time over `static`'s on the same draws (the best there is while the
ranks are equal) and how often it moved the split. The last two rows add a real change (the last
rank three times slower from iteration 100), with and without spikes. Each with the default
pooling (`pool_s`: iterations of about 9 ms pooled two or three to an update) and without it.

    .venv-train/bin/python benchmarks/spikes.py
"""

import numpy as np
from dynalloc.core.policies import make_policy
from dynalloc.core.policy import POOL_S
from dynalloc.core.simulate import simulate

ITERATIONS, SEEDS, BATCH = 300, 20, 512
INTERCEPT, SLOPE = 5e-4, 1.6e-5  # seconds: about 9 ms an iteration at 256 samples a rank

SCENARIOS = [  # (label, ranks, one spike every this many iterations on average, change at)
    ("2 ranks, a spike every 40", 2, 40, None),
    ("2 ranks, a spike every 15", 2, 15, None),
    ("4 ranks, a spike every 20", 4, 20, None),
    ("2 ranks, spikes every 40, 1:3 from 100", 2, 40, 100),
    ("2 ranks, no spikes, 1:3 from 100", 2, None, 100),
]


def speeds(seed, ranks, every, change):
    """Each iteration's slowdown factors: spikes drawn once per seed, the change from `change`."""
    rng = np.random.default_rng(1000 + seed)
    spikes = {}
    for i in range(1, ITERATIONS) if every else ():
        if rng.random() < 1 / every:
            spikes[i] = (int(rng.integers(ranks)), float(rng.uniform(2.2, 3.0)))

    def speed(i):
        factors = [1.0] * ranks
        if change is not None and i >= change:
            factors[-1] = 3.0
        if i in spikes:
            factors[spikes[i][0]] *= spikes[i][1]
        return factors

    return speed


def main():
    print(f"{'scenario':40s} {'adaptive / static time, moves (median, max)':44s} "
          "the same, each iteration an update (pool_s: 0)")  # fmt: skip
    for label, ranks, every, change in SCENARIOS:
        cells = [label]
        for pool_s in (POOL_S, 0.0):
            ratio, moves = compare(ranks, every, change, pool_s)
            cells.append(f"{ratio:.4f}x; {int(np.median(moves))}, {max(moves)}")
        print(f"{cells[0]:40s} {cells[1]:44s} {cells[2]}")


def compare(ranks, every, change, pool_s):
    """adaptive's time over static's (mean over seeds) and its moves of the split per seed."""
    ratios, moves = [], []
    for seed in range(SEEDS):
        times = {}
        for name in ("adaptive", "static"):
            trace = simulate(make_policy({"name": name, "pool_s": pool_s}, ranks, BATCH),
                             [INTERCEPT] * ranks, [SLOPE] * ranks, ITERATIONS, noise=0.1,
                             seed=seed, speed=speeds(seed, ranks, every, change))  # fmt: skip
            times[name] = trace.times.max(axis=1).sum()
            if name == "adaptive":
                changed = np.any(np.diff(trace.shares, axis=0), axis=1)
                moves.append(int(np.count_nonzero(changed)))
        ratios.append(times["adaptive"] / times["static"])
    return float(np.mean(ratios)), moves


if __name__ == "__main__":
    main()
