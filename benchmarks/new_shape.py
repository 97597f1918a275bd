"""What a share the rank has not computed before costs: every share is an input shape, and MXNet
plans memory for each new one. Prints LeNet's forward+backward time per sample (one thread, one
core) for a share held still, two shares alternating (both seen before) and a new share every
iteration; the adaptive policy's `min_move` weighs this cost against the imbalance a move removes.

    OMP_NUM_THREADS=1 .venv-train/bin/python benchmarks/new_shape.py
"""

import argparse
import os
import time

import mxnet as mx
import numpy as np
from dynalloc.runtime.mxnet.models import build_model
from mxnet import autograd, gluon


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share", type=int, default=167, help="the share held still")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    net = build_model("lenet", 10, (1, 28, 28), seed=0)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def per_sample_ms(share):
        x = mx.nd.random.uniform(shape=(share, 1, 28, 28))
        y = mx.nd.zeros((share,))
        start = time.perf_counter()
        with autograd.record():
            value = loss(net(x), y)
        value.backward()
        mx.nd.waitall()
        return (time.perf_counter() - start) / share * 1e3

    held, other = args.share, args.share + 3
    for share in (held, other):
        per_sample_ms(share)  # warm-up: both seen before the rounds
    fresh = iter(range(other + 1, other + 1 + args.rounds * args.iterations))
    for round_ in range(args.rounds):
        kinds = {
            "held": [held] * args.iterations,
            "alternating, seen": [held, other] * (args.iterations // 2),
            "new every iteration": [next(fresh) for _ in range(args.iterations)],
        }
        medians = {k: np.median([per_sample_ms(b) for b in v]) for k, v in kinds.items()}
        print(
            f"round {round_}: "
            + ", ".join(f"{k} {v:.3f} ms/sample" for k, v in medians.items())
            + f"; new/held {medians['new every iteration'] / medians['held']:.3f}"
        )


if __name__ == "__main__":
    main()
