"""dynalloc's fixed cost per iteration under PyTorch: a DDP loop with `DynamicBatch` against the
same loop with plain DDP (equal shares, DDP's own averaging), on MLPs whose iterations take
about 1, 10 and 100 ms, with equal ranks and with rank 1 three times slower, all in one
torchrun invocation, round by round (`overhead_runs.measure`). Both loops take shuffled samples
by index from in-memory tensors (no DataLoader; plain DDP's through one permutation, as
`DistributedSampler` shuffles), so that what differs is what each adds to an iteration. A
slowed rank hands each bucket to the all-reduce as late as a device that much slower would
(`runtime.torch.hook.SlowBuckets`), in both. Rank 0 writes the figures to OUT as JSON.

    torchrun --standalone --nproc-per-node=2 benchmarks/overhead_torch.py --out OUT.json
"""

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import torch  # noqa: E402
from ddp_plain import held_back  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.torch import DynamicBatch, init_process_group  # noqa: E402
from overhead_runs import arguments, endless, measure  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

# name: (input features, hidden width, hidden layers, global batch); iterations of about 1, 10
# and 100 ms on this machine's cores with equal ranks.
SIZES = {"1 ms": (20, 32, 1, 64), "10 ms": (64, 512, 2, 512), "100 ms": (256, 1536, 2, 1024)}


def model(features, width, layers, seed=0):
    torch.manual_seed(seed)
    blocks = [nn.Linear(features, width), nn.ReLU()]
    for _ in range(layers - 1):
        blocks += [nn.Linear(width, width), nn.ReLU()]
    return DistributedDataParallel(nn.Sequential(*blocks, nn.Linear(width, 1)))


class Plain:
    """Plain DDP (equal shares, DDP's own averaging, or `hook`: (state, hook) registered on it)
    on its own model and draw of `samples` samples, a block of iterations at a time; rank 1
    `factor` times slower, each bucket held as a slower device's."""

    def __init__(self, size, rank, ranks, samples, factor=1.0, hook=None):
        features, width, layers, self.batch = SIZES[size]
        self.ddp = model(features, width, layers)
        if hook is not None:
            self.ddp.register_comm_hook(*hook)
        self.factor = factor
        self.slow = held_back(self.ddp) if factor > 1.0 else None
        self.optimizer = torch.optim.SGD(self.ddp.parameters(), lr=1e-3)
        self.x, self.y = data(features, samples)
        self.order = torch.randperm(samples, generator=torch.Generator().manual_seed(0))
        self.share, self.rank, self.k = self.batch // ranks, rank, 0

    def mine(self):
        """This rank's share of the next global batch (from the first again after the last: a
        ladder runs a block of plain DDP beside each variant's)."""
        start = self.k % (len(self.order) // self.batch) * self.batch + self.rank * self.share
        self.k += 1
        return self.order[start : start + self.share]

    def block(self, iterations):
        for _ in range(iterations):
            mine = self.mine()
            self.optimizer.zero_grad()
            if self.slow is not None:
                self.slow.start(self.factor)
            nn.functional.mse_loss(self.ddp(self.x[mine]), self.y[mine]).backward()
            self.optimizer.step()


class Dynamic:
    """The same model and loop under `DynamicBatch` (`policy`), a block at a time."""

    def __init__(self, size, rank, ranks, samples, factor=1.0, policy="adaptive",
                 hold_memory=True):  # fmt: skip
        features, width, layers, batch = SIZES[size]
        self.ddp = model(features, width, layers)
        optimizer = torch.optim.SGD(self.ddp.parameters(), lr=1e-3)
        self.x, self.y = data(features, samples)
        self.dyn = DynamicBatch(self.ddp, optimizer, samples, batch, policy=policy,
                                pin_cores=False, slowdown=lambda iteration: factor,
                                hold_memory=hold_memory)  # fmt: skip
        self.steps = endless(self.dyn)

    def block(self, iterations):
        for _ in range(iterations):
            step = next(self.steps)
            loss = nn.functional.mse_loss(self.ddp(self.x[step.indices]), self.y[step.indices])
            step.backward(loss)  # the loss then travels in the last bucket
            step.finish(loss)


def data(features, count):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(count, features, generator=generator)
    return x, torch.randn(count, 1, generator=generator)


def main():
    args = arguments(__doc__)
    torch.set_num_threads(1)
    # DynamicBatch fixes malloc's thresholds for the whole process as it starts: set from the
    # start, plain DDP's first runs are under them too.
    hold_freed_memory()
    rank, ranks = init_process_group()
    measure(Plain, Dynamic, SIZES, rank, ranks, args)


if __name__ == "__main__":
    main()
