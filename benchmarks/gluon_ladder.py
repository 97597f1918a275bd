"""Under mpiexec: what `DynamicBatch` adds to a Gluon iteration, against the bare MPI Allreduce
loop of bench-overhead (`overhead_gluon.Bare`) in the same rounds (`ladder_rounds.climb`: a
block of each variant right after one of the bare loop, each on its own model kept from round
to round), as bench-overhead measures it beside the 1:3 loops; here with a second bare loop,
on one rank too, and the page faults. The variants:

- `bare again`: a second bare loop (the noise of the measurement itself);
- `+ loss read`, `+ ranks' values`, `+ iteration row`, `+ policy's observe`: the bare loop with
  the work every DynamicBatch iteration needs added a piece at a time, each as DynamicBatch does
  it (`Rung`): what that work costs by itself, apart from the step's structure (its plan, the
  Step, the calls), which is the rest up to `DynamicBatch static`;
- `DynamicBatch static`, `DynamicBatch adaptive`: the whole step (`step.compute`,
  `step.finish`), equal shares, then the policy's.

Equal ranks, bench-overhead's MLPs (`overhead_gluon.SIZES`). One rank (`mpiexec -n 1`) has no
second process on the cores: its quartiles are the narrowest, and it shows what the step itself
costs. Rank 0 prints the bare loop's iteration, then one line a variant. Every loop runs under
the malloc thresholds DynamicBatch fixes (`runtime.common.heap`), set before the first;
`--glibc-defaults` leaves glibc's own for all, and the page faults they cost show in the last
column.

    OMP_NUM_THREADS=1 MXNET_CPU_WORKER_NTHREADS=1 .venv-train/bin/mpiexec -n 2 \\
        .venv-train/bin/python benchmarks/gluon_ladder.py [--size "1 ms"] [--rounds 20] \\
        [--block 200] [--glibc-defaults]
"""

import argparse
import math
import operator
import statistics
import time

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import mxnet as mx  # noqa: E402
from dynalloc.core.policies import make_policy  # noqa: E402
from dynalloc.rundir import Row  # noqa: E402
from dynalloc.runtime.common.allocation import RANK_VALUES, folded  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.common.timing import ComputeTimer  # noqa: E402
from dynalloc.runtime.mxnet.gluon import LossReader, gradients_in_one_array, numpy_view  # noqa: E402
from ladder_rounds import climb, positive, report  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mxnet import autograd  # noqa: E402
from overhead_gluon import LOSS, SIZES, Bare, Dynamic  # noqa: E402

RUNGS = ("+ loss read", "+ ranks' values", "+ iteration row", "+ policy's observe")


class Rung(Bare):
    """The bare loop plus the first `level` pieces of `RUNGS`, each as `DynamicBatch` does it:
    the mean of the per-sample losses (`LossReader`); this rank's values written into the
    block after the gradients, summed in the same Allreduce and read back; the batch loss and
    this rank's `Row`; the `static` policy fed the iteration."""

    def __init__(self, size, rank, ranks, samples, level):
        super().__init__(size, rank, ranks, samples)
        trainable = [p for p in self.net.collect_params().values() if p.grad_req != "null"]
        self.summed = numpy_view(gradients_in_one_array(trainable, len(RANK_VALUES) * ranks))
        self.tail = self.summed[-len(RANK_VALUES) * ranks :]
        self.level, self.ranks, self.counts = level, ranks, [self.share] * ranks
        self.losses = LossReader(self.batch)
        self.policy = make_policy("static", ranks, self.batch)
        self.rows, self.iteration = [], 0

    def block(self, iterations):
        level, rank = self.level, self.rank
        for _ in range(iterations):
            started = time.perf_counter()
            mine = self.mine()
            with ComputeTimer(self.factor, mx.nd.waitall) as timer:
                with autograd.record():
                    loss = LOSS(self.net(mx.nd.array(self.x[mine])), mx.nd.array(self.y[mine]))
                loss.backward()
            mean = self.losses.mean(loss, self.share)
            if level > 1:
                self.tail[:] = folded([timer.seconds, timer.seconds, mean, 0.0], rank, self.ranks)
            sync = time.perf_counter()
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, self.summed, op=MPI.SUM)
            sync_s = time.perf_counter() - sync
            if level > 1:
                rows = self.tail.reshape(self.ranks, len(RANK_VALUES)).tolist()
            self.trainer.step(self.batch)
            mx.nd.waitall()
            if level > 2:
                busy, balanced, losses, _ = zip(*rows, strict=True)
                batch_loss = sum(map(operator.mul, losses, self.counts)) / self.batch
                if not math.isfinite(batch_loss):
                    raise ValueError(f"the loss became {batch_loss}")
                row = Row(self.iteration, 0, rank, self.share, timer.seconds, sync_s,
                          max(busy) - busy[rank], time.perf_counter() - started, losses[rank],
                          1.0, "static", 0.0, 0.0, self.ranks)  # fmt: skip
                self.rows.append(row)
                self.iteration += 1
            if level > 3:
                self.policy.observe(self.counts, balanced, self.iteration, 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1 ms", choices=list(SIZES))
    parser.add_argument("--rounds", type=positive, default=20)
    parser.add_argument("--block", type=positive, default=200, help="iterations of a block")
    parser.add_argument(
        "--glibc-defaults", action="store_true", help="leave glibc's malloc thresholds, in all"
    )
    args = parser.parse_args()
    if not args.glibc_defaults:
        hold_freed_memory()
    rank, ranks = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    samples = SIZES[args.size][3] * (args.rounds + 1) * args.block
    bare = Bare(args.size, rank, ranks, samples)
    ladder = {"bare again": Bare(args.size, rank, ranks, samples)}
    for level, name in enumerate(RUNGS, 1):
        ladder[name] = Rung(args.size, rank, ranks, samples, level)
    for policy in ("static", "adaptive"):
        dynamic = Dynamic(args.size, rank, ranks, samples, policy=policy,
                          hold_memory=not args.glibc_defaults)  # fmt: skip
        ladder[f"DynamicBatch {policy}"] = dynamic
    ratios, extra, faults, bare_s, bare_faults = climb(bare, ladder, args.rounds, args.block)
    if rank == 0:
        report(f"{args.size}, {ranks} rank{'s' if ranks > 1 else ''}, {args.rounds} rounds of "
               f"{args.block} iterations; the bare loop's iteration "
               f"{statistics.median(bare_s) * 1e3:.3f} ms with {bare_faults:.0f} page faults on "
               "rank 0", "the bare loop", ratios, extra, faults)  # fmt: skip


if __name__ == "__main__":
    main()
