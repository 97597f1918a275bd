"""What longer pools in a steady state (`STEADY_POOLS`, `core.policy`) do to `adaptive`:
simulated pairs of ranks, 3,000 iterations of about 1, 3 and 10 ms under +-5% jitter, where one
rank's iteration in a hundred is a spike three times as long; equal ranks, rank 1 1.3 or 3 times
slower, or turning three times slower at iteration 1,000 or 1,017 (a pool's start, or within
one); 5 seeds. Against pools of `pool_s` always (`STEADY_POOLS` set to 1, as before them) on the
same draws: the updates, and the total time (the slowest rank's, summed) without and with each
update's own cost in the loop (`UPDATE_S`, as a two-rank Gluon loop measured it; the simulator
charges none).

    .venv-train/bin/python benchmarks/steady_pools.py
"""

import numpy as np
from dynalloc.core import policy as policy_module
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import simulate

ITERATIONS, SEEDS, BATCH, NOISE, SPIKES = 3000, 5, 512, 0.05, 0.01
UPDATE_S = 3e-4  # an update of `adaptive` on two ranks, inside a training loop
SIZES = (1e-3, 3e-3, 1e-2)  # seconds of an iteration at the equal split, equal ranks
SCENARIOS = [  # (label, rank 1's slowdown, the iteration from which it is three times slower)
    ("equal ranks", 1.0, None),
    ("1:1.3", 1.3, None),
    ("1:3", 3.0, None),
    ("1:3 from 1,000", 1.0, 1000),
    ("1:3 from 1,017", 1.0, 1017),
]


def run(iteration_s, slowdown, change, steady, seed):
    """(updates, total seconds) of `adaptive` with steady pools `steady` times `pool_s` long."""
    policy_module.STEADY_POOLS = steady
    spikes = np.random.default_rng(seed + 1000).random((ITERATIONS, 2)) < SPIKES
    intercept, slope = 0.1 * iteration_s, 0.9 * iteration_s / (BATCH / 2)

    def speed(i):
        turned = 3.0 if change is not None and i >= change else 1.0
        return np.where(spikes[i], 3.0, 1.0) * [1.0, turned]

    policy = make_policy("adaptive", 2, BATCH)
    trace = simulate(policy, [intercept] * 2, [slope, slope * slowdown], ITERATIONS, NOISE,
                     seed, speed)  # fmt: skip
    return policy.updates, float(trace.true_times.max(axis=1).sum())


def main():
    steady = policy_module.STEADY_POOLS
    print(f"steady pools {steady}x pool_s, against pools of pool_s; sums over {SEEDS} seeds")
    print(f"{'scenario':16s} {'iteration':>9s} {'updates':>13s} {'time':>7s} "
          f"{'with updates':>12s}")  # fmt: skip
    for label, slowdown, change in SCENARIOS:
        for size in SIZES:
            runs = {g: [run(size, slowdown, change, g, seed) for seed in range(SEEDS)]
                    for g in (steady, 1)}  # fmt: skip
            updates = {g: sum(r[0] for r in runs[g]) for g in runs}
            seconds = {g: sum(r[1] for r in runs[g]) for g in runs}
            costed = {g: seconds[g] + UPDATE_S * updates[g] for g in runs}
            print(
                f"{label:16s} {size * 1e3:7.0f} ms {updates[steady]:6d}/{updates[1]:<6d} "
                f"{seconds[steady] / seconds[1]:.4f}x {costed[steady] / costed[1]:.4f}x"
            )
    policy_module.STEADY_POOLS = steady


if __name__ == "__main__":
    main()
