"""Under torchrun: what a DDP communication hook written in Python costs, against DDP's own
all-reduce in C++, on bench-overhead's three MLPs (`overhead_torch.SIZES`).

Each rank, pinned to its core as `dynalloc train` pins it, times the backward pass (where DDP
runs the hooks and waits for the buckets) of four DDP models run in turn, in reverse order on
odd repeats: DDP with no hook (its C++ all-reduce and average); PyTorch's own Python hook
(`ddp_comm_hooks.default_hooks.allreduce_hook`, the same all-reduce and average); dynalloc's
share-weighted hook (`runtime.torch.hook`) alone, and with the ranks' values in its last
bucket, as `DynamicBatch` runs it. Equal ranks, equal shares. Rank 0 prints the medians (ms).

    OMP_NUM_THREADS=1 .venv-torch/bin/torchrun --standalone --nproc-per-node=2 \
        benchmarks/hook_cost.py [ITERATIONS]
"""

import statistics
import sys
import time

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # before torch starts its threads

import torch  # noqa: E402
from dynalloc.runtime.common.allocation import RANK_VALUES  # noqa: E402
from dynalloc.runtime.torch import init_process_group  # noqa: E402
from dynalloc.runtime.torch.hook import ShareWeight, share_weighted_hook  # noqa: E402
from overhead_torch import SIZES, data, model  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

RUNS = ("DDP's C++", "PyTorch's Python hook", "dynalloc's hook", "dynalloc's, with values")


def backward_times(run, size, rank, ranks, iterations):
    """Seconds of each backward pass of `iterations` of the DDP loop with hook `run`."""
    features, width, layers, batch = SIZES[size]
    ddp = model(features, width, layers)
    state = None
    if run == RUNS[1]:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif run in RUNS[2:]:
        values = (lambda ready: [0.0] * len(RANK_VALUES)) if run == RUNS[3] else None
        state = ShareWeight(values=values)
        state.weight = 1.0 / ranks  # equal shares: DDP's own average
        ddp.register_comm_hook(state, share_weighted_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = data(features, batch * iterations)
    share = batch // ranks
    seconds = []
    for k in range(iterations):
        mine = slice(k * batch + rank * share, k * batch + (rank + 1) * share)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[mine]), y[mine])
        if state is not None:
            state.start(1.0)
        began = time.perf_counter()
        loss.backward()
        seconds.append(time.perf_counter() - began)
        optimizer.step()
    return seconds[iterations // 10 :]  # the first tenth warms up


def main():
    torch.set_num_threads(1)
    rank, ranks = init_process_group()
    iterations = {"1 ms": 600, "10 ms": 200, "100 ms": 40}
    if len(sys.argv) > 1:
        iterations = dict.fromkeys(iterations, int(sys.argv[1]))
    for size in SIZES:
        times = {run: [] for run in RUNS}
        for repeat in range(3):
            for run in RUNS if repeat % 2 == 0 else RUNS[::-1]:
                times[run] += backward_times(run, size, rank, ranks, iterations[size])
        if rank == 0:
            medians = {run: statistics.median(t) * 1e3 for run, t in times.items()}
            print(f"{size:>6}: " + ", ".join(f"{run} {ms:.3f}" for run, ms in medians.items()))


if __name__ == "__main__":
    main()
