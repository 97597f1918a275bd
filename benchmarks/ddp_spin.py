"""Under torchrun, equal ranks, bench-overhead's PyTorch MLP: how much of a DDP rank's compute
window gloo's threads take on its one core (spinning while they wait for the other rank's
earlier buckets), and what counting that time as compute does to `adaptive`.

First `static` for `--iterations`: each rank's compute as measured (until its last bucket was
ready, less what the threads Python did not start took: `hook.ShareWeight.one_core`), what
they took, and the compute with it counted, as before 2026-12-07; deciles 10, 50 and 90 in
ms. Then `--runs` runs of `adaptive` each way, the same iterations: the moves of the split, the
range of rank 0's share, and whether the equal-speed test still held the equal split at the
end.

    OMP_NUM_THREADS=1 .venv-torch/bin/torchrun --standalone --nproc-per-node=2 \\
        benchmarks/ddp_spin.py [--size "10 ms"] [--iterations 400] [--runs 6]
"""

import argparse

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.torch import init_process_group  # noqa: E402
from ladder_rounds import positive  # noqa: E402
from overhead_torch import SIZES, Dynamic  # noqa: E402


def deciles(seconds):
    return " ".join(f"{v * 1e3:5.2f}" for v in np.percentile(seconds, [10, 50, 90]))


def windows(size, rank, ranks, iterations):
    """Each iteration's (compute, what gloo's threads took) under `static`."""
    loop = Dynamic(size, rank, ranks, SIZES[size][3] * (iterations + 1), policy="static")
    measured = []
    for _ in range(iterations):
        loop.block(1)
        measured.append((loop.dyn.rows[-1].compute_s, loop.dyn.hook.stolen))
    return np.array(measured[min(20, iterations // 10) :])  # past the first iterations


def adaptive_run(size, rank, ranks, iterations, one_core):
    """(moves of the split, rank 0's least and largest share, still holding) of one run."""
    loop = Dynamic(size, rank, ranks, SIZES[size][3] * (iterations + 1), policy="adaptive")
    loop.dyn.hook.one_core = one_core and loop.dyn.hook.one_core
    loop.block(iterations)
    shares = [row.batch_size for row in loop.dyn.rows]
    zero = torch.tensor(shares if rank == 0 else [0] * len(shares))
    dist.all_reduce(zero)  # rank 0's shares on every rank
    moves = int(np.count_nonzero(np.diff(zero.numpy())))
    return moves, int(zero.min()), int(zero.max()), loop.dyn.policy.holding


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="10 ms", choices=list(SIZES))
    parser.add_argument("--iterations", type=positive, default=400)
    parser.add_argument("--runs", type=positive, default=6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hold_freed_memory()
    rank, ranks = init_process_group()
    measured = windows(args.size, rank, ranks, args.iterations)
    compute, taken = measured[:, 0], measured[:, 1]
    line = (f"rank {rank}: compute {deciles(compute)} | gloo's threads {deciles(taken)} | "
            f"counted as compute {deciles(compute + taken)}")  # fmt: skip
    lines = [None] * ranks
    dist.all_gather_object(lines, line)
    if rank == 0:
        print(f"{args.size}, {ranks} equal ranks, `static`, {len(compute)} iterations; "
              f"ms, deciles 10, 50, 90:", *lines, sep="\n")  # fmt: skip
    for one_core, label in ((True, "as measured"), (False, "gloo's threads counted")):
        runs = [adaptive_run(args.size, rank, ranks, args.iterations, one_core)
                for _ in range(args.runs)]  # fmt: skip
        if rank == 0:
            cells = ", ".join(f"{m} ({lo}-{hi}{', held' if held else ''})"
                              for m, lo, hi, held in runs)  # fmt: skip
            print(f"`adaptive`, {label}: moves (rank 0's shares) per run: {cells}")


if __name__ == "__main__":
    main()
