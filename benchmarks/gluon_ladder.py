"""Under mpiexec: what `DynamicBatch` adds to a Gluon iteration, against the bare MPI Allreduce
loop of bench-overhead (`overhead_gluon.Bare`) in the same rounds (`ladder_rounds.climb`: a
block of each variant right after one of the bare loop, each on its own model kept from round
to round), as bench-overhead measures it beside the 1:3 loops; here with a second bare loop,
on one rank too, and the page faults. The variants:

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

from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from ladder_rounds import climb, positive, report  # noqa: E402
from mpi4py import MPI  # noqa: E402
from overhead_gluon import SIZES, Bare, Dynamic  # noqa: E402


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
