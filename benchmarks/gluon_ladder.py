"""Under mpiexec: what `DynamicBatch` adds to a Gluon iteration, against the bare MPI Allreduce
loop of bench-overhead (`overhead_gluon.bare`) in the same rounds (`ladder_rounds.climb`: a
block of each variant right after one of the bare loop, each on its own model kept from round
to round). bench-overhead compares whole runs, whose ratios drift between invocations by more
than the gaps it looks for. The variants:

- `bare again`: a second bare loop (the noise of the measurement itself);
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
import statistics

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.mxnet.gluon import DynamicBatch, gradients_in_one_array, numpy_view  # noqa: E402
from ladder_rounds import climb, positive, report  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mxnet import autograd  # noqa: E402
from overhead_gluon import LOSS, SIZES, data, model  # noqa: E402


class Bare:
    """bench-overhead's bare loop (equal shares, one in-place Allreduce of the gradients,
    `trainer.step`), a block at a time, with its own model and draw of the samples."""

    def __init__(self, size, rank, ranks, samples):
        features, width, layers, self.batch = SIZES[size]
        self.net, self.trainer = model(features, width, layers)
        trainable = [p for p in self.net.collect_params().values() if p.grad_req != "null"]
        self.summed = numpy_view(gradients_in_one_array(trainable))
        self.x, self.y = data(features, samples)
        self.order = np.random.default_rng(0).permutation(samples)
        self.share, self.rank, self.k = self.batch // ranks, rank, 0

    def block(self, iterations):
        for _ in range(iterations):
            start = self.k % (len(self.order) // self.batch) * self.batch + self.rank * self.share
            self.k += 1
            mine = self.order[start : start + self.share]
            with autograd.record():
                loss = LOSS(self.net(mx.nd.array(self.x[mine])), mx.nd.array(self.y[mine]))
            loss.backward()
            mx.nd.waitall()
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, self.summed, op=MPI.SUM)
            self.trainer.step(self.batch)
            mx.nd.waitall()


class Dynamic:
    """The same model under `DynamicBatch` (`policy`), as bench-overhead's loop runs it; a new
    epoch where one ends."""

    def __init__(self, size, rank, ranks, samples, policy, hold_memory):
        features, width, layers, batch = SIZES[size]
        net, trainer = model(features, width, layers)
        self.net, self.x, self.y = net, *data(features, samples)
        self.dyn = DynamicBatch(net.collect_params(), trainer, samples, batch, policy=policy,
                                pin_cores=False, hold_memory=hold_memory)  # fmt: skip
        self.epoch = 0
        self.steps = self.dyn.epoch(0)

    def block(self, iterations):
        for _ in range(iterations):
            step = next(self.steps, None)
            if step is None:
                self.epoch += 1
                self.steps = self.dyn.epoch(self.epoch)
                step = next(self.steps)
            with step.compute():
                with autograd.record():
                    loss = LOSS(self.net(mx.nd.array(self.x[step.indices])),
                                mx.nd.array(self.y[step.indices]))  # fmt: skip
                loss.backward()
            step.finish(loss)


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
    for policy in ("static", "adaptive"):
        dynamic = Dynamic(args.size, rank, ranks, samples, policy, not args.glibc_defaults)
        ladder[f"DynamicBatch {policy}"] = dynamic
    ratios, extra, faults, bare_s, bare_faults = climb(bare, ladder, args.rounds, args.block)
    if rank == 0:
        report(f"{args.size}, {ranks} rank{'s' if ranks > 1 else ''}, {args.rounds} rounds of "
               f"{args.block} iterations; the bare loop's iteration "
               f"{statistics.median(bare_s) * 1e3:.3f} ms with {bare_faults:.0f} page faults on "
               "rank 0", "the bare loop", ratios, extra, faults)  # fmt: skip


if __name__ == "__main__":
    main()
