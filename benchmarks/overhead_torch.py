"""dynalloc's fixed cost per iteration under PyTorch: a DDP loop with `DynamicBatch` against the
same loop with plain DDP (equal shares, DDP's own averaging), on MLPs whose iterations take
about 1, 10 and 100 ms, with equal ranks and with rank 1 three times slower, all in one
torchrun invocation, the runs interleaved (their order reversed on odd repeats) so that the
machine's drift meets each alike. Both loops take shuffled samples by index from in-memory
tensors (no DataLoader; plain DDP's through one permutation a run, as `DistributedSampler`
shuffles), so that what differs is what each adds to an iteration. A slowed rank hands each
bucket to the all-reduce as late as a device that much slower would
(`runtime.torch.hook.SlowBuckets`), in both. Rank 0 writes samples/s of each run (medians over
repeats) to OUT as JSON.

    torchrun --standalone --nproc-per-node=2 benchmarks/overhead_torch.py --out OUT.json
"""

import time
from functools import partial

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import torch  # noqa: E402
from ddp_plain import held_back  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.torch import DynamicBatch, init_process_group  # noqa: E402
from overhead_runs import STATIC, arguments, interleave  # noqa: E402
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


def plain(size, factor, rank, ranks, iterations, warm_up):
    """Seconds of `iterations` of plain DDP, after `warm_up` untimed ones."""
    features, width, layers, batch = SIZES[size]
    ddp = model(features, width, layers)
    # DDP's own averaging, each bucket held as late as a slower device's
    slow = held_back(ddp) if factor > 1.0 else None
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = data(features, batch * (iterations + warm_up))
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    share = batch // ranks
    for k in range(iterations + warm_up):
        if k == warm_up:
            began = time.perf_counter()
        mine = order[k * batch + rank * share : k * batch + (rank + 1) * share]
        optimizer.zero_grad()
        if slow is not None:
            slow.start(factor)
        nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        optimizer.step()
    return time.perf_counter() - began


def dynamic(size, factor, rank, ranks, iterations, warm_up, policy="adaptive"):
    """Seconds of `iterations` of the same loop with DynamicBatch (`policy`), after `warm_up`
    untimed ones in which the shares settle."""
    features, width, layers, batch = SIZES[size]
    ddp = model(features, width, layers)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = data(features, batch * (iterations + warm_up))
    dyn = DynamicBatch(ddp, optimizer, len(x), batch, policy=policy, pin_cores=False,
                       slowdown=lambda iteration: factor)  # fmt: skip
    for step in dyn.epoch(0):
        if step.iteration == warm_up:
            began = time.perf_counter()
        loss = nn.functional.mse_loss(ddp(x[step.indices]), y[step.indices])
        step.backward(loss)  # the loss then travels in the last bucket
        step.finish(loss)
    return time.perf_counter() - began


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
    runs = {"plain DDP": plain, "dynalloc": dynamic, STATIC: partial(dynamic, policy="static")}
    interleave(runs, SIZES, rank, ranks, args)


if __name__ == "__main__":
    main()
