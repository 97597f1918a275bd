"""What one policy update costs: every rank runs it after every iteration, on the critical path.

Four simulated ranks (one twice as slow, ±10% noise), B=512, 200 updates per policy; prints the
median wall time of `Policy.update` in milliseconds.

    .venv-train/bin/python benchmarks/policy_update.py
"""

import time

import numpy as np
from dynalloc.core.policies import make_policy


def median_update_ms(name, updates=200, seed=0):
    policy = make_policy(name, 4, 512)
    rng = np.random.default_rng(seed)
    shares, spent = policy.shares, []
    for iteration in range(1, updates + 1):
        seconds = (0.012 + 0.001 * shares * np.array([1, 1, 1, 2])) * rng.uniform(0.9, 1.1, 4)
        started = time.perf_counter()
        shares = policy.update(shares, seconds, iteration, 0)
        spent.append(time.perf_counter() - started)
    return 1000 * float(np.median(spent))


if __name__ == "__main__":
    for name in ("proportional", "controller", "adaptive"):
        print(f"{name:12s} {median_update_ms(name):.3f} ms")
