"""Exact data distribution: which samples each rank takes in each iteration.

One permutation per epoch, derived from (seed, epoch) and so identical on every rank; iteration k
takes the next B indices of it and cuts them into contiguous pieces of the current shares, in rank
order. Every sample of an epoch is used exactly once, whatever the shares are.
"""

import numpy as np

from dynalloc.core.shares import per_rank, proportional_shares


class GlobalBatchSampler:
    """Global batches of an epoch and each rank's piece of them.

    drop_last: drop the epoch's remainder (fewer than B samples) instead of training on it as a
    smaller last batch. A remainder too small to give every rank its `min_share` samples (one
    number for all ranks or one per rank) is always dropped, since a rank without samples cannot
    be timed.

    >>> sampler = GlobalBatchSampler(dataset_size=10, global_batch=4, seed=0)
    >>> sampler.batches_per_epoch
    3
    >>> [len(sampler.rank_indices(0, k, [3, 1], 0)) for k in range(2)]
    [3, 3]
    """

    def __init__(self, dataset_size, global_batch, seed, drop_last=False, min_share=1, ranks=1):
        if dataset_size < global_batch:
            raise ValueError(
                f"dataset of {dataset_size} samples is smaller than one global "
                f"batch of {global_batch}"
            )
        self.dataset_size, self.global_batch, self.seed = dataset_size, global_batch, seed
        full, remainder = divmod(dataset_size, global_batch)
        least = sum(per_rank("min_share", min_share, ranks))
        keep_remainder = not drop_last and remainder >= max(least, 1)
        self.batches_per_epoch = full + (1 if keep_remainder else 0)
        self.min_share = min_share

    def permutation(self, epoch):
        return np.random.default_rng([self.seed, epoch]).permutation(self.dataset_size)

    def batch_size(self, k):
        """Samples in global batch k: B, or the remainder for a smaller last batch."""
        return min(self.global_batch, self.dataset_size - k * self.global_batch)

    def shares_for(self, k, shares):
        """`shares` of B, rescaled to the size of batch k (the same unless it is the last)."""
        size = self.batch_size(k)
        if size == self.global_batch:
            return np.asarray(shares, dtype=np.int64)
        # A rank with no share (min_share 0) keeps none: a tiny weight instead of an invalid 0.
        # No rank gets more than its share of B (the batch is smaller), so no cap can bind.
        return proportional_shares(
            np.maximum(np.asarray(shares, float), 1e-9), size, self.min_share
        )

    def rank_indices(self, epoch, k, shares, rank, permutation=None):
        """Sample indices of `rank` in global batch `k` of `epoch` under `shares` of that batch."""
        order = self.permutation(epoch) if permutation is None else permutation
        # In Python ints: numpy's sum of a few numbers costs more than their arithmetic, tens
        # of microseconds an iteration with the caches a backward pass leaves.
        counts = np.asarray(shares).tolist()
        start = k * self.global_batch + sum(counts[:rank])
        return order[start : start + counts[rank]]
