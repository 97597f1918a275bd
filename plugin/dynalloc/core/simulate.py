"""Drive a policy with simulated ranks: the same policy objects as training, no processes.

`simulate` runs affine ranks (the tests check convergence, stability and reaction to changes of
speed with it; handy to try a policy's parameters before spending cluster time); `replay` runs
the speeds a real run measured, so that policies can be compared on the very same machine;
`project` runs a modelled cluster (`dynalloc.core.cluster`, `dynalloc simulate`): thousands of
ranks, the exchange and the overhead of an iteration, and the exact optimum as the ceiling.
"""

from dataclasses import dataclass

import numpy as np

from dynalloc.core.monotone import minmax_monotone
from dynalloc.core.partition import GlobalBatchSampler


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
    shapes = ShapeMemory(len(shares), policy.global_batch)
    used, measured = [], []
    for i, speeds in enumerate(per_sample):
        seconds = shares * speeds * (1.0 + new_shape * shapes.first_time(shares))
        used.append(shares)
        measured.append(seconds)
        upcoming = epochs[min(i + 1, len(epochs) - 1)] if epochs is not None else 0
        shares = policy.update(shares, seconds, i + 1, int(upcoming))
    return Trace(np.array(used), np.array(measured), np.array(measured))


class ShapeMemory:
    """Which share each rank has computed before, one bit per (rank, share): MXNet plans memory
    for every input shape new to a process, so the first use of a share costs more."""

    def __init__(self, ranks, largest):
        self.bits = np.zeros((ranks, largest // 8 + 1), dtype=np.uint8)
        self.rows = np.arange(ranks)

    def first_time(self, shares):
        """Per rank, whether `shares` holds a share it never computed (then it has)."""
        shares = np.asarray(shares, dtype=np.int64)
        column, bit = shares >> 3, np.uint8(1) << (shares & 7).astype(np.uint8)
        new = (self.bits[self.rows, column] & bit) == 0
        self.bits[self.rows, column] |= bit
        return new


@dataclass
class Projection:
    """One policy driven through a modelled cluster."""

    policy: str
    times: np.ndarray  # seconds of each iteration: slowest compute + exchange + overhead
    samples: np.ndarray  # samples of each iteration (an epoch's last batch may be smaller)
    wait_fraction: float  # mean over ranks, as rundir.wait_fractions defines it
    split_changes: int  # iterations after which the split moved (the last one aside)

    def mean_s(self):
        return float(self.times.mean())

    def steady_s(self):
        """Mean over the second half, once the policy has settled."""
        return float(self.times[len(self.times) // 2 :].mean())

    def samples_per_s(self):
        return float(self.samples.sum() / self.times.sum())


class Optimum:
    """The ceiling: the exact min-max split of the cluster's noise-free costs (jitter at its
    mean), recomputed only when a change of speed starts or ends, held fixed otherwise. Driven
    like a policy, it meets the same noise draws as the policies."""

    name = "optimum"

    def __init__(self, cluster):
        self.cluster, self.cache = cluster, {}
        self.shares = self._split(0)
        self.global_batch = cluster.global_batch

    def update(self, shares, seconds, iteration, epoch):
        self.shares = self._split(iteration)
        return self.shares.copy()

    def _split(self, iteration):
        factors = self.cluster.factors(iteration)
        key = factors.tobytes()
        if key not in self.cache:
            costs = [
                _scaled(group.cost, f)
                for group, f in zip(self.cluster.groups, factors, strict=True)
            ]
            lows, highs = self.cluster.bounds()
            self.cache[key] = minmax_monotone(
                costs, self.cluster.counts, self.cluster.global_batch, lows, highs
            )
        return self.cache[key]


def _scaled(cost, factor):
    return lambda shares: factor * cost(shares)


def project(cluster, policy):
    """Drive `policy` (a Policy over the cluster's ranks, or Optimum) through `cluster`.

    Each iteration costs the slowest rank's compute, then the Allreduce, then the fixed
    overhead: the ranks wait for the slowest before the exchange can finish. A rank's compute is
    its group's cost of its share, times its slowdowns, times its noise, and `new_shape` more
    the first time it computes that share. The noise is drawn from (seed, iteration) alone, so
    every policy meets the same draws; the first iteration is MXNet's warm-up in a real run, and
    the policies treat it so (`adaptive` ignores it unless it shows a jump of speed).
    """
    ranks, batch = cluster.ranks, cluster.global_batch
    sampler = None
    if cluster.dataset_size is not None:
        sampler = GlobalBatchSampler(
            cluster.dataset_size, batch, cluster.seed, min_share=cluster.min_share, ranks=ranks
        )
    sigma = cluster.per_rank([np.sqrt(np.log1p(g.noise**2)) for g in cluster.groups])
    shapes = ShapeMemory(ranks, batch) if cluster.new_shape else None
    fixed = cluster.exchange_s() + cluster.overhead_s
    times, samples = np.empty(cluster.iterations), np.empty(cluster.iterations)
    busy, slowest_total, split_changes = np.zeros(ranks), 0.0, 0
    shares = policy.shares.copy()
    for i in range(cluster.iterations):
        epoch, k = divmod(i, sampler.batches_per_epoch) if sampler else (0, i)
        used = sampler.shares_for(k, shares) if sampler else shares
        rng = np.random.default_rng([cluster.seed, i])
        noise = np.exp(sigma * rng.standard_normal(ranks) - sigma**2 / 2)
        seconds = cluster.seconds(used) * cluster.factors(i, rng.uniform(-1, 1, ranks)) * noise
        if shapes is not None:
            seconds *= 1.0 + cluster.new_shape * shapes.first_time(used)
        slowest = float(seconds.max())
        times[i], samples[i] = slowest + fixed, used.sum()
        busy += seconds
        slowest_total += slowest
        upcoming = divmod(i + 1, sampler.batches_per_epoch)[0] if sampler else 0
        moved = policy.update(used, seconds, i + 1, upcoming)
        split_changes += i + 1 < cluster.iterations and not np.array_equal(moved, shares)
        shares = moved
    # rundir.wait_fractions: a rank's waits over its busy time plus waits; each iteration's
    # busy time plus wait is the slowest rank's.
    wait = float(np.mean(1.0 - busy / slowest_total))
    return Projection(policy.name, times, samples, wait, split_changes)
