"""Known costs turned into the affine costs a warm start begins from (`Policy.warm`).

- A modelled cluster (a cluster file): each rank's cost is its group's curve, perhaps a measured
  table that is not a line; the warm start takes the line tangent to it at the split those
  curves balance exactly (`simulate.Optimum`), so the first iteration already runs at that
  split and the models predict the neighbourhood the policy moves in.
- A probe: each rank timed at two shares; the line through the two points.
"""

import numpy as np

from dynalloc.core.simulate import Optimum

SMALLEST_SLOPE = 1e-9  # seconds a sample: a flat measured cost is still taken as rising


def tangents(costs, shares):
    """(a, c): per rank, the line tangent to `costs[r]` (a function of an int array of shares)
    at `shares[r]`, by a central difference over a tenth of the share; a >= 0."""
    shares = np.asarray(shares, dtype=np.int64)
    a, c = np.empty(len(shares)), np.empty(len(shares))
    for r, (cost, share) in enumerate(zip(costs, shares, strict=True)):
        step = max(1, int(round(0.1 * share)))
        low, high = max(int(share) - step, 1), int(share) + step
        ends = cost(np.array([low, high]))
        c[r] = max(float(ends[1] - ends[0]) / (high - low), SMALLEST_SLOPE)
        a[r] = max(float(cost(np.array([share]))[0]) - c[r] * share, 0.0)
    return a, c


def cluster_costs(cluster):
    """(a, c) of every rank of `cluster` at its first iteration: tangents at the exact split."""
    shares = Optimum(cluster).shares
    factors = cluster.per_rank(cluster.factors(0))
    costs = [group.cost for group in cluster.groups for _ in range(group.count)]
    a, c = tangents(costs, shares)
    return factors * a, factors * c


def probe_costs(small, large, seconds_small, seconds_large):
    """(a, c): per rank, the line through (small, seconds_small) and (large, seconds_large)."""
    small, large = np.asarray(small, dtype=float), np.asarray(large, dtype=float)
    t_small, t_large = np.asarray(seconds_small, float), np.asarray(seconds_large, float)
    if not np.all(large > small):
        raise ValueError("a probe times a larger share after a smaller one")
    c = np.maximum((t_large - t_small) / (large - small), SMALLEST_SLOPE)
    return np.maximum(t_small - c * small, 0.0), c
