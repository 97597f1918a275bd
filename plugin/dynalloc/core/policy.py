"""Allocation policies: from the shares just used and each rank's compute time, the next shares.

Every rank runs the same policy on the same allgathered numbers, so all agree on the next split
without a master. All policies share one contract, enforced here: shares are integers that sum
exactly to the global batch and lie within `[min_share, max_share]` (each bound one number for all
ranks or a list of one per rank, `dynalloc.core.shares.share_bounds`), and a measurement that is
zero, negative, NaN or infinite leaves the shares as they were (with one warning).

Iterations shorter than `pool_s` are pooled (`Policy.update`): an update costs the same however
short the iteration (0.2 ms on two ranks, over a millisecond on thousands), so on iterations of
a few milliseconds updating after each would cost more than most imbalances, and would chase
each one's noise. A pool of iterations at the same shares is one observation, their mean
times, once the slowest rank has computed `pool_s` seconds in it. A pool after one that left the
shares as they were is `STEADY_POOLS` times as long: in a steady state that halves what the
updates cost (0.3-0.4 ms each in a two-rank loop, and a quarter to a half more again in what
they evict from the caches, benchmarks/cache_spill.py; the simulator charges none), while
a move brings back the short pools, so a policy converges at their pace
(benchmarks/steady_pools.py). An iteration of `pool_s` or longer ends the pool it joins.
"""

import math
import operator
import warnings

import numpy as np

from dynalloc.core.shares import equal_shares, proportional_shares, share_bounds

POOL_S = 0.02  # seconds of the slowest rank's compute that one update observes, at least
STEADY_POOLS = 2  # a pool after one that left the shares as they were: this many `pool_s`


class Policy:
    """Base of all policies; subclasses implement `_next(shares, seconds, iteration, epoch)`.

    Usage, once per iteration on every rank::

        shares = policy.shares                      # the split for the first iteration
        ...                                         # each rank computes its share, times it
        shares = policy.update(shares, compute_s, iteration + 1, epoch_of_next)
    """

    name = ""

    def __init__(self, ranks, global_batch, min_share=1, max_share=None, pool_s=POOL_S):
        # Checked once: the policy splits after every iteration.
        self.bounds = share_bounds(ranks, global_batch, min_share, max_share)
        if not (isinstance(pool_s, int | float) and not isinstance(pool_s, bool)
                and math.isfinite(pool_s) and pool_s >= 0):  # fmt: skip
            raise ValueError(f"pool_s must be a number of seconds >= 0, got {pool_s!r}")
        self.ranks, self.global_batch = ranks, global_batch
        self.min_share, self.max_share = min_share, max_share
        self.shares = self.initial_shares()
        self._warned = False
        self.pool_s = pool_s
        self.pooling = pool_s  # the compute the pool under way observes: longer while shares stay
        self.updates = 0  # observations the policy has seen, pooled ones as one
        self.pool = None  # [shares, summed seconds per rank, iterations] not yet observed
        self.epoch_next = None  # the epoch of the iteration under way (the last update's)

    def initial_shares(self):
        return equal_shares(self.ranks, self.global_batch, self.min_share, self.max_share)

    def split(self, weights_or_costs):
        return proportional_shares(weights_or_costs, self.global_batch, bounds=self.bounds)

    def update(self, shares, compute_s, iteration, epoch):
        """Next shares of the global batch after an iteration that used `shares`.

        `shares` may sum to less than the global batch (an epoch's last, smaller batch);
        `iteration` and `epoch` number the iteration that the returned shares are for.
        """
        self.observe(shares, compute_s, iteration, epoch)
        return self.shares.copy()

    def observe(self, shares, compute_s, iteration, epoch):
        """`update` for a caller that reads `self.shares` when it needs them (DynamicBatch's
        plan of the next step): no copy of them, on every iteration's critical path."""
        # As Python lists: the pooled iterations, most of them on short ones, cost a few numpy
        # calls each otherwise, tens of microseconds with the caches a backward pass leaves
        # (the cost ladder, benchmarks/cost_ladder.py); builtins rather than generators, for
        # the same reason.
        try:
            shares, seconds = numbers(shares, int), numbers(compute_s, float)
        except TypeError:
            shares = seconds = ()
        if len(shares) != self.ranks or len(seconds) != self.ranks:
            raise ValueError(
                f"expected {self.ranks} shares and times, got {shares} and {compute_s}"
            )
        if not (math.isfinite(sum(seconds)) and min(seconds) > 0):  # a NaN or inf sums so
            if not self._warned:
                warnings.warn(
                    f"{self.name}: unusable compute times {seconds} at iteration "
                    f"{iteration}; keeping the previous shares (warned once)",
                    RuntimeWarning,
                    stacklevel=3,
                )
                self._warned = True
            return
        pool = self.pool
        if pool is not None and shares != pool[0]:  # an epoch's smaller last batch
            self._close(pool, iteration - 1, self.epoch_next)
            pool = None
        if pool is None:
            pool = [shares, seconds, 1]
        else:
            pool[1] = list(map(operator.add, pool[1], seconds))
            pool[2] += 1
        ends_epoch = epoch != self.epoch_next
        self.epoch_next = epoch
        # The first iteration goes alone: it is the framework's warm-up, which adaptive judges.
        # A pool of one iteration is within `pooling` (>= `pool_s`) when that one is.
        if (self.updates and not ends_epoch and max(seconds) < self.pool_s
                and (pool[2] == 1 or max(pool[1]) < self.pooling)):  # fmt: skip
            self.pool = pool
        else:
            self.pool = None
            self._close(pool, iteration, epoch)

    def _close(self, pool, iteration, epoch):
        """One observation, a pool's mean times (one iteration's where it holds one), for
        `_next`."""
        shares, summed, iterations = pool
        seconds = np.array(summed, dtype=float) / iterations
        self.updates += 1
        before = self.shares
        self.shares = np.asarray(
            self._next(np.array(shares, dtype=np.int64), seconds, iteration, epoch),
            dtype=np.int64,
        )
        # Longer after a pool that left the shares as they were (not after an iteration alone:
        # the warm-up, one of `pool_s` or longer, an epoch's last).
        steady = iterations > 1 and (self.shares == before).all()
        self.pooling = self.pool_s * STEADY_POOLS if steady else self.pool_s

    def warm(self, intercepts, slopes, noise=None):
        """Start from each rank's known cost `intercepts[r] + slopes[r] * b` (a warm start);
        only a policy that models costs can."""
        raise ValueError(f"policy {self.name!r} models no costs: a warm start is adaptive's")

    def _next(self, shares, seconds, iteration, epoch):
        raise NotImplementedError


def numbers(values, kind):
    """`values` as a list of Python `kind`s: an array through its own `tolist`, one pass in C
    (`map` makes a numpy scalar of each item first: 225 against 15 us for 4,096 shares), a
    sequence item by item (no numpy call, on the few ranks of a training loop)."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values.astype(kind, copy=False).tolist()
    return list(map(kind, values))
