"""Drive a policy with simulated affine ranks: the same policy objects as training, no processes.

Used by the tests to check convergence, stability and reaction to changes of speed, and handy to
try a policy's parameters before spending cluster time.
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
