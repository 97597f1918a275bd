"""Under torchrun: what each piece of `DynamicBatch` adds to a DDP iteration, against plain DDP in
the same rounds, as bench-overhead measures the whole step: every round runs a block of
iterations of each variant right after one of plain DDP, each on its own model kept from round
to round, and a variant's figure is the median over rounds of plain's block time over its own
(1.00: no cost), with the spread of those ratios. The ladder adds one piece at a time:

- `plain DDP again`: a second plain model (the noise of the measurement itself);
- `Python hook`: PyTorch's own `default_hooks.allreduce_hook` (DDP's path for any hook in Python);
- `dynalloc's hook`: the share-weighted hook with the ranks' values in its last bucket, at the
  weight 1 that `step.backward(loss)` leaves it;
- `weighted loss`: plain DDP's loop taking numpy indices and backing the loss weighted as
  `step.backward` weights it (the share times the ranks over the batch: DDP averages);
- `DynamicBatch static`, `DynamicBatch adaptive`: the whole step (`step.backward`,
  `step.finish`), equal shares, then the policy's.

Equal ranks, bench-overhead's MLPs (`overhead_torch.SIZES`). With `--slowdown F`, rank 1 is F
times slower in every loop (bench-overhead's 1:3 is F = 3: each bucket held by
`hook.SlowBuckets`), and the ladder keeps what has a slowed form: plain again and the whole
step. Rank 0 prints plain DDP's iteration, then one line a variant: its ratio and its extra
time an iteration. One rank (`--nproc-per-node=1`) has no second process on the cores: its
quartiles are the narrowest, and it shows what the step itself costs. Every loop runs under the
malloc thresholds DynamicBatch fixes (`runtime.common.heap`), set before the first;
`--glibc-defaults` leaves glibc's own for all, DynamicBatch's included (`hold_memory=False`),
and the page faults they cost show in the last column.

    OMP_NUM_THREADS=1 .venv-torch/bin/torchrun --standalone --nproc-per-node=2 \\
        benchmarks/cost_ladder.py [--size "10 ms"] [--rounds 30] [--block 20] [--slowdown 3] \\
        [--glibc-defaults]
"""

import argparse
import math
import statistics

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # before torch starts its threads

import torch  # noqa: E402
from dynalloc.runtime.common.allocation import RANK_VALUES  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.torch import init_process_group  # noqa: E402
from dynalloc.runtime.torch.hook import ShareWeight, share_weighted_hook  # noqa: E402
from ladder_rounds import climb, positive, report  # noqa: E402
from overhead_torch import SIZES, Dynamic, Plain  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402


class WeightedLoss(Plain):
    """Plain DDP's loop with numpy indices and the loss weighted as `step.backward` weights it."""

    def __init__(self, size, rank, ranks, samples):
        super().__init__(size, rank, ranks, samples)
        self.order, self.scale = self.order.numpy(), self.share * ranks / self.batch

    def block(self, iterations):
        for _ in range(iterations):
            mine = self.mine()
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.ddp(self.x[mine]), self.y[mine])
            float(loss.detach())
            (loss * self.scale).backward()
            self.optimizer.step()


PLAIN = "plain DDP"  # the loop every variant is measured against


def variants(size, rank, ranks, samples, slowdown, hold_memory):
    """The ladder at 1:1; with rank 1 `slowdown` times slower, what has a slowed form."""
    factor = slowdown if rank == 1 else 1.0
    ladder = {"plain DDP again": Plain(size, rank, ranks, samples, factor)}
    if slowdown == 1.0:
        values = ShareWeight(values=lambda ready: [0.0] * len(RANK_VALUES))  # weight 1
        python_hook, our_hook = (None, default_hooks.allreduce_hook), (values, share_weighted_hook)
        ladder |= {
            "Python hook": Plain(size, rank, ranks, samples, hook=python_hook),
            "dynalloc's hook": Plain(size, rank, ranks, samples, hook=our_hook),
            "weighted loss": WeightedLoss(size, rank, ranks, samples),
        }
    for policy in ("static", "adaptive"):
        dynamic = Dynamic(size, rank, ranks, samples, factor, policy, hold_memory)
        ladder[f"DynamicBatch {policy}"] = dynamic
    return ladder


def at_least_one(text):
    """A slowdown: a finite number of at least 1 (1: equal ranks; infinity would hold the
    slowed rank's buckets for ever)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 1.0):
        raise argparse.ArgumentTypeError(f"needs a finite number of at least 1, got {text!r}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="10 ms", choices=list(SIZES))
    parser.add_argument("--rounds", type=positive, default=30)
    parser.add_argument("--block", type=positive, default=20, help="iterations of a block")
    parser.add_argument("--slowdown", type=at_least_one, default=1.0, help="rank 1's")
    parser.add_argument(
        "--glibc-defaults", action="store_true", help="leave glibc's malloc thresholds, in all"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not args.glibc_defaults:
        hold_freed_memory()
    rank, ranks = init_process_group()
    if args.slowdown > 1.0 and ranks < 2:
        parser.error("--slowdown slows rank 1: it needs at least 2 ranks")
    samples = SIZES[args.size][3] * (args.rounds + 1) * args.block
    plain = Plain(args.size, rank, ranks, samples, args.slowdown if rank == 1 else 1.0)
    ladder = variants(args.size, rank, ranks, samples, args.slowdown, not args.glibc_defaults)
    ratios, extra, faults, plain_s, plain_faults = climb(plain, ladder, args.rounds, args.block)
    if rank == 0:
        slowed = f"{ranks} ranks, rank 1 {args.slowdown:g}x slower" if ranks > 1 else "1 rank"
        report(f"{args.size}, {slowed}, {args.rounds} rounds of {args.block} iterations; "
               f"plain DDP's iteration {statistics.median(plain_s) * 1e3:.3f} ms with "
               f"{plain_faults:.0f} page faults on rank 0", PLAIN, ratios, extra,
               faults)  # fmt: skip


if __name__ == "__main__":
    main()
