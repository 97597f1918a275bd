"""What Python run between two iterations costs beyond its own time: bench-overhead's bare Gluon
loop (`overhead_gluon.Bare`), one rank, in blocks that alternate with the same loop followed,
after each iteration, by one update of `adaptive` on two ranks (what a pool's end adds to a
DynamicBatch iteration). Each iteration is timed without the update, so the difference of the
two loops' median iterations is what the update left behind: the backward pass and the update
evict each other's code and data from the core's caches, and the next forward and backward pass
pays to bring them back. Prints the loops' median iterations, the update's own median time
inside the loop, and the spill.

    OMP_NUM_THREADS=1 MXNET_CPU_WORKER_NTHREADS=1 .venv-train/bin/mpiexec -n 1 \\
        .venv-train/bin/python benchmarks/cache_spill.py [--size "1 ms"] [--rounds 20]
"""

import argparse
import statistics
import time

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core, as dynalloc train pins a rank

import numpy as np  # noqa: E402
from dynalloc.core.policies import make_policy  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from ladder_rounds import positive  # noqa: E402
from overhead_gluon import SIZES, Bare  # noqa: E402
from overhead_runs import iterations_in  # noqa: E402


class Updates:
    """One `adaptive` update on two ranks after each call, on times drawn around a 3% gap."""

    def __init__(self):
        self.policy = make_policy("adaptive", 2, 64)
        self.times = np.random.default_rng(0).uniform(0.0297, 0.0303, (1 << 16, 2)) * [1, 1.03]
        self.k = 0

    def __call__(self):
        self.k += 1
        shares = self.policy.shares.tolist()
        self.policy.update(shares, self.times[self.k % len(self.times)].tolist(), self.k, 0)


def timed(loop, iterations, after=None):
    """Each iteration's seconds, and the seconds of `after` run once after each."""
    spent, extra = [], []
    for _ in range(iterations):
        began = time.perf_counter()
        loop.block(1)
        ended = time.perf_counter()
        spent.append(ended - began)
        if after is not None:
            after()
            extra.append(time.perf_counter() - ended)
    return spent, extra


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="1 ms")
    parser.add_argument("--rounds", type=positive, default=20)
    args = parser.parse_args()
    hold_freed_memory()
    block = iterations_in(args.size, 0.2)
    samples = SIZES[args.size][-1] * (block * (args.rounds + 1) + 1)
    clean, followed = Bare(args.size, 0, 1, samples), Bare(args.size, 0, 1, samples)
    update = Updates()
    timed(clean, block)
    timed(followed, block, update)  # warm-up, untimed
    seconds = {"clean": [], "followed": [], "update": []}
    for round_ in range(args.rounds):
        order = [("clean", clean), ("followed", followed)]
        for name, loop in order if round_ % 2 == 0 else order[::-1]:
            spent, extra = timed(loop, block, update if loop is followed else None)
            seconds[name] += spent
            seconds["update"] += extra
    clean_us, followed_us, update_us = (statistics.median(seconds[name]) * 1e6 for name in seconds)
    print(f"{args.size}, one rank, {args.rounds} rounds of {block} iterations, medians: "
          f"iteration {clean_us:.1f} us, {followed_us:.1f} us after an update; the update "
          f"{update_us:.1f} us itself, {followed_us - clean_us:+.1f} us spilt into the next "
          "iteration")  # fmt: skip


if __name__ == "__main__":
    main()
