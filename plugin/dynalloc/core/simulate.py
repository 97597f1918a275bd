"""Drive a policy with simulated ranks: the same policy objects as training, no processes.

`simulate` runs affine ranks (the tests check convergence, stability and reaction to changes of
speed with it; handy to try a policy's parameters before spending cluster time); `replay` runs
the speeds a real run measured, so that policies can be compared on the very same machine.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class Trace:
    shares: np.ndarray  # (iterations, ranks) shares used in each iteration
    times: np.ndarray  # (iterations, ranks) measured (noisy) compute seconds
    true_times: np.ndarray  # (iterations, ranks) noise-free seconds of the same shares

    def spread(self):
        """Per iteration: (slowest - fastest) / mean of the noise-free times."""
        t = self.true_times
        return (t.max(axis=1) - t.min(axis=1)) / t.mean(axis=1)


def simulate(policy, intercepts, slopes, iterations, noise=0.0, seed=0, speed=None):
    """Run `iterations` steps; rank r needs `speed(i)[r] * (a_r + c_r * b)` seconds at step i.

    noise: each measurement is multiplied by a uniform factor in [1 - noise, 1 + noise].
    speed: optional function of the iteration returning per-rank slowdown factors.
    """
    a = np.asarray(intercepts, dtype=float)
    c = np.asarray(slopes, dtype=float)
    rng = np.random.default_rng(seed)
    shares = policy.shares.copy()
    used, measured, exact = [], [], []
    for i in range(iterations):
        factor = np.ones_like(a) if speed is None else np.asarray(speed(i), dtype=float)
        true = factor * (a + c * shares)
        seconds = true * rng.uniform(1 - noise, 1 + noise, size=len(a))
        used.append(shares)
        measured.append(seconds)
        exact.append(true)
        shares = policy.update(shares, seconds, i + 1, 0)
    return Trace(np.array(used), np.array(measured), np.array(exact))


def replay(policy, per_sample, new_shape=0.0, epochs=None):
    """Drive `policy` with speeds measured in a real run: rank r needs `share * per_sample[i, r]`
    seconds at step i, `1 + new_shape` times that the first time it computes a share (MXNet
    plans memory for every new input shape; benchmarks/new_shape.py measures it). `epochs`:
    the epoch of each step (all 0 by default), for the policies that act at epoch boundaries.

    Every policy replayed on one run's speeds meets the same machine, second by second: the
    paired comparison that separate runs, each on its own drifting machine, cannot give.
    """
    per_sample = np.asarray(per_sample, dtype=float)
    shares = policy.shares.copy()
    seen = [set() for _ in range(per_sample.shape[1])]
    used, measured = [], []
    for i, speeds in enumerate(per_sample):
        charged = np.ones(len(shares))
        for rank, share in enumerate(shares):
            if share not in seen[rank]:
                seen[rank].add(share)
                charged[rank] += new_shape
        seconds = shares * speeds * charged
        used.append(shares)
        measured.append(seconds)
        upcoming = epochs[min(i + 1, len(epochs) - 1)] if epochs is not None else 0
        shares = policy.update(shares, seconds, i + 1, int(upcoming))
    return Trace(np.array(used), np.array(measured), np.array(measured))
