"""What `adaptive`'s moves of the split cost under this machine's own noise, apart from the cost
of its update: two equal ranks train the 10 ms MLP of `overhead_torch.py` with `static` (equal
shares), each iteration's per-sample compute time is kept, and rank 0 drives `static` and
`adaptive` through those times (`dynalloc.core.simulate.replay`, the very machine second by
second). Prints the spread of the ranks' per-sample times, then each policy's total time and
how often it moved the split.

    OMP_NUM_THREADS=1 .venv-torch/bin/torchrun --standalone --nproc-per-node=2 \\
        benchmarks/replay_noise.py --iterations 600
"""

import argparse

import numpy as np
import torch
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import replay
from dynalloc.runtime.torch import DynamicBatch, init_process_group
from overhead_torch import SIZES, data, model
from torch import nn


def measured(size, iterations, rank, ranks):
    """Every rank's per-sample compute seconds of each iteration of a `static` run."""
    features, width, layers, batch = SIZES[size]
    ddp = model(features, width, layers)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x, y = data(features, batch * iterations)
    dyn = DynamicBatch(ddp, optimizer, len(x), batch, policy="static", pin_cores=False)
    for step in dyn.epoch(0):
        loss = nn.functional.mse_loss(ddp(x[step.indices]), y[step.indices])
        step.backward(loss)
        step.finish(loss)
    mine = [row.compute_s / row.batch_size for row in dyn.rows]
    return dyn.gather(mine).T, batch  # (iterations, ranks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--size", default="10 ms", choices=list(SIZES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank, ranks = init_process_group()
    per_sample, batch = measured(args.size, args.iterations, rank, ranks)
    if rank != 0:
        return
    ratio = per_sample.max(axis=1) / per_sample.min(axis=1)
    print(f"{len(per_sample)} iterations; slowest / fastest rank's per-sample time: median "
          f"{np.median(ratio):.2f}, 95th percentile {np.quantile(ratio, 0.95):.2f}, over 2x in "
          f"{np.mean(ratio > 2):.0%} of the iterations")  # fmt: skip
    totals = {}
    for name in ("static", "adaptive"):
        trace = replay(make_policy(name, ranks, batch), per_sample)
        totals[name] = trace.times.max(axis=1).sum()
        moves = int(np.count_nonzero(np.any(np.diff(trace.shares, axis=0), axis=1)))
        print(f"{name:9s} {totals[name]:.3f} s, {totals[name] / totals['static']:.4f}x static, "
              f"{moves} moves of the split")  # fmt: skip


if __name__ == "__main__":
    main()
