"""This rank's share of every iteration as a batch sampler for the framework's own DataLoader
(`torch.utils.data.DataLoader` or `gluon.data.DataLoader`, `batch_sampler=`), so that its
workers, prefetching, pinning and collate work as a script has them; `steps(loader)` pairs each
batch the loader returns with the step of its iteration.

A loader asks its batch sampler for an iteration's indices ahead of time (its prefetch depth:
`prefetch_factor x num_workers` for PyTorch's, `prefetch` for Gluon's; none without workers),
and shares decided after that iteration's predecessor finished would come too late. So an
iteration's shares are the policy's when the loader asked: the latest it has when a loader
without workers asks, a few iterations older under prefetching. Each rank's loader asks at the
same points (after the same finished iterations), so all ranks take the same shares, and the
global batch is split exactly whatever they are.
"""

import time
from collections import deque

from dynalloc.errors import DynallocError


class ShareSampler:
    """The batch sampler of one DynamicBatch (`Allocation.batch_sampler()`): an iterable of
    this rank's sample indices (lists of ints), one item per iteration of the epoch set."""

    def __init__(self, allocation):
        self.allocation, self.epoch, self.start = allocation, 0, 0
        self.planned = deque()  # (epoch, batch, shares, indices, next_epoch) handed out

    def set_epoch(self, epoch, start=0):
        """The epoch the next iteration over this sampler yields, from its global batch
        `start`."""
        self.epoch, self.start = epoch, start

    def __len__(self):
        return self.allocation.sampler.batches_per_epoch - self.start

    def __iter__(self):
        self.planned.clear()  # a loader iterated afresh, or an epoch left early
        for plan in self.allocation.plan(self.epoch, self.start):
            self.planned.append(plan)
            yield plan[3].tolist()

    def steps(self, loader):
        """(step, batch) for each batch of `loader` (built with this sampler); the time spent
        waiting for the batch is the step's data_s, which the policy balances with compute."""
        own = getattr(loader, "batch_sampler", getattr(loader, "_batch_sampler", self))
        if own is not self:
            raise DynallocError(
                "the loader's batch_sampler is not this DynamicBatch's: build it as "
                "DataLoader(dataset, batch_sampler=dyn.batch_sampler(), ...)"
            )
        batches = iter(loader)
        while True:
            began = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            step = self.allocation.Step(self.allocation, *self.planned.popleft())
            step.data_s = time.perf_counter() - began
            yield step, batch
