"""dynalloc's fixed cost per iteration under MXNet Gluon: a loop with `DynamicBatch` against the
same loop around a bare MPI Allreduce (equal shares, the gradients in one array summed in
place, `trainer.step`), on MLPs whose iterations take about 1, 10 and 100 ms, with equal ranks
and with rank 1 three times slower, all in one mpiexec invocation, round by round
(`overhead_runs.measure`). Both take shuffled samples by index from the same numpy arrays (the
bare loop's through one permutation), and both emulate a slower rank alike
(`runtime.common.timing.ComputeTimer`: the compute measured, then slept again twice over).
All run under the malloc thresholds that DynamicBatch fixes (`runtime.common.heap`).
Rank 0 writes the figures to OUT as JSON.

    mpiexec -n 2 python benchmarks/overhead_gluon.py --out OUT.json
"""

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from dynalloc.runtime.common.heap import hold_freed_memory  # noqa: E402
from dynalloc.runtime.common.timing import ComputeTimer  # noqa: E402
from dynalloc.runtime.mxnet.gluon import (  # noqa: E402
    DynamicBatch,
    gradients_in_one_array,
    numpy_view,
)
from mpi4py import MPI  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from overhead_runs import arguments, endless, measure  # noqa: E402

# name: (input features, hidden width, hidden layers, global batch), as overhead_torch's
SIZES = {"1 ms": (20, 32, 1, 64), "10 ms": (64, 384, 2, 512), "100 ms": (256, 1280, 2, 1024)}
LOSS = gluon.loss.L2Loss()


def model(features, width, layers):
    mx.random.seed(0)
    net = gluon.nn.Sequential()
    for _ in range(layers):
        net.add(gluon.nn.Dense(width, activation="relu"))
    net.add(gluon.nn.Dense(1))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, features)))
    return net, gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1e-3})


def data(features, count):
    generator = np.random.default_rng(1)
    return generator.random((count, features), np.float32), generator.random((count, 1), np.float32)


class Bare:
    """The bare loop (equal shares, one in-place Allreduce of the gradients, `trainer.step`),
    a block of iterations at a time, on its own model and draw of `samples` samples; rank 1
    `factor` times slower."""

    def __init__(self, size, rank, ranks, samples, factor=1.0):
        features, width, layers, self.batch = SIZES[size]
        self.net, self.trainer = model(features, width, layers)
        trainable = [p for p in self.net.collect_params().values() if p.grad_req != "null"]
        self.summed = numpy_view(gradients_in_one_array(trainable))
        self.x, self.y = data(features, samples)
        self.order = np.random.default_rng(0).permutation(samples)
        self.share, self.rank, self.factor, self.k = self.batch // ranks, rank, factor, 0

    def mine(self):
        """This rank's share of the next global batch (from the first again after the last: a
        ladder runs a block of the bare loop beside each variant's)."""
        start = self.k % (len(self.order) // self.batch) * self.batch + self.rank * self.share
        self.k += 1
        return self.order[start : start + self.share]

    def block(self, iterations):
        for _ in range(iterations):
            mine = self.mine()
            with ComputeTimer(self.factor, mx.nd.waitall):
                with autograd.record():
                    loss = LOSS(self.net(mx.nd.array(self.x[mine])), mx.nd.array(self.y[mine]))
                loss.backward()
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, self.summed, op=MPI.SUM)
            self.trainer.step(self.batch)
            mx.nd.waitall()


class Dynamic:
    """The same model and loop under `DynamicBatch` (`policy`), a block at a time."""

    def __init__(self, size, rank, ranks, samples, factor=1.0, policy="adaptive",
                 hold_memory=True):  # fmt: skip
        features, width, layers, batch = SIZES[size]
        self.net, trainer = model(features, width, layers)
        self.x, self.y = data(features, samples)
        self.dyn = DynamicBatch(self.net.collect_params(), trainer, samples, batch,
                                policy=policy, pin_cores=False, hold_memory=hold_memory,
                                slowdown=lambda iteration: factor)  # fmt: skip
        self.steps = endless(self.dyn)

    def block(self, iterations):
        for _ in range(iterations):
            step = next(self.steps)
            with step.compute():
                with autograd.record():
                    loss = LOSS(self.net(mx.nd.array(self.x[step.indices])),
                                mx.nd.array(self.y[step.indices]))  # fmt: skip
                loss.backward()
            step.finish(loss)


def main():
    args = arguments(__doc__)
    # DynamicBatch fixes malloc's thresholds for the whole process as it starts: set from the
    # start, the bare loop's first runs are under them too.
    hold_freed_memory()
    rank, ranks = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    measure(Bare, Dynamic, SIZES, rank, ranks, args)


if __name__ == "__main__":
    main()
