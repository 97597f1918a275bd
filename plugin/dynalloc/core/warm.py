"""Known costs turned into the affine costs a warm start begins from (`Policy.warm`).

- A modelled cluster (a cluster file): each rank's cost is its group's curve, perhaps a measured
  table that is not a line; the warm start takes the line tangent to it at the split those
  curves balance exactly (`simulate.Optimum`), so the first iteration already runs at that
  split and the models predict the neighbourhood the policy moves in.
- A probe: each rank timed at two shares; the line through the two points. The first share is
  an eighth of the equal one, the same for every rank; the second, each rank's share of a split
  proportional to the speeds the first showed, so that each line is measured where its rank's
  share will be, and no slow rank is timed on a share it would never get (at half the equal
  share, LBB's slowest GPU took 567 ms where the optimum's iteration takes 180). A short pass
  is timed again, the fastest kept (`fastest_pass`).
"""

import numpy as np

from dynalloc.core.shares import proportional_shares
from dynalloc.core.simulate import Optimum

SMALLEST_SLOPE = 1e-9  # seconds a sample: a flat measured cost is still taken as rising
PROBE_SHORT_S, PROBE_REPEATS = 0.05, 5  # a probe's passes under this sum are timed again


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


def first_probe(global_batch, ranks):
    """The share every rank is timed at first: an eighth of the equal share."""
    return max(1, global_batch // ranks // 8)


def second_probe(first, seconds, global_batch, bounds):
    """Each rank's second probe share: its share of the split proportional to the speeds the
    first probe showed (`first` samples in `seconds[r]`), moved off `first` by one at least."""
    second = proportional_shares(first / np.asarray(seconds, float), global_batch, bounds=bounds)
    return np.where(second == first, first + 1, second)


def fastest_pass(time_pass):
    """A rank's seconds at one probe share: the fastest of up to PROBE_REPEATS calls of
    `time_pass()` (the seconds of one timed pass) while they add up to under PROBE_SHORT_S.
    One deschedule by the OS outweighs a pass of a few ms (a loaded CI machine once probed a
    rank three times slower as fast as the other), and such noise only ever adds."""
    times = []
    while len(times) < PROBE_REPEATS and sum(times) < PROBE_SHORT_S:
        times.append(time_pass())
    return min(times)


def probe_costs(first, second, seconds_first, seconds_second):
    """(a, c): per rank, the line through its two probes (shares and seconds, in any order)."""
    b1, b2 = np.broadcast_arrays(np.asarray(first, float), np.asarray(second, float))
    t1, t2 = np.asarray(seconds_first, float), np.asarray(seconds_second, float)
    if np.any(b1 == b2):
        raise ValueError("a probe times two different shares")
    c = np.maximum((t2 - t1) / (b2 - b1), SMALLEST_SLOPE)
    return np.maximum(t1 - c * b1, 0.0), c
