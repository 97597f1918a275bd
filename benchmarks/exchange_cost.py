"""Under mpiexec: what the gradient exchange costs beyond the bare MPI Allreduce it wraps.

Each rank, pinned to its core as `dynalloc train` pins it, runs LeNet's forward and backward on
256 samples of its own, then either exchanges the gradients as `DynamicBatch` does (its
`GradientExchange` over the gradients it keeps in one array) or runs a bare in-place Allreduce
of a separate float32 buffer of as many values; the two alternate, iteration by iteration, so
that both meet the same caches (just written by a backward pass), the same arrival of the ranks
(no barrier: the last rank to finish its backward is the one whose time counts, as in
training) and the same machine. A tight loop of bare Allreduces, the ranks released together by
a barrier, is measured after them for reference. Prints one JSON line: medians (seconds) of the
last-arriving rank's time per iteration, and their ratio.

    .venv-train/bin/mpiexec -n 2 .venv-train/bin/python benchmarks/exchange_cost.py [ITERATIONS]
"""

import json
import sys
import time

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # before MXNet starts its threads

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from dynalloc.runtime.mxnet.exchange import GradientExchange  # noqa: E402
from dynalloc.runtime.mxnet.gluon import gradients_in_one_array, numpy_view  # noqa: E402
from dynalloc.runtime.mxnet.models import build_model  # noqa: E402
from mpi4py import MPI  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 300
net = build_model("lenet", 10, (1, 28, 28), seed=0)
gradients = gradients_in_one_array(
    [p for p in net.collect_params().values() if p.grad_req != "null"]
)
exchange = GradientExchange([numpy_view(gradients)], comm)
bare = np.ones(gradients.size, dtype=np.float32)
rng = np.random.default_rng(rank)
x = mx.nd.array(rng.random((256, 1, 28, 28), dtype=np.float32))
y = mx.nd.array(rng.integers(0, 10, 256))
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()


def backward():
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    mx.nd.waitall()


def timed(collective):
    began = time.perf_counter()
    collective()
    return time.perf_counter() - began


seconds = {"exchange": [], "bare after backward": [], "bare in a tight loop": []}
for i in range(iterations + 10):  # the first 10: warm-up
    backward()
    exchanged = timed(exchange.allreduce)
    backward()
    reduced = timed(lambda: comm.Allreduce(MPI.IN_PLACE, bare, op=MPI.SUM))
    if i >= 10:
        seconds["exchange"].append(exchanged)
        seconds["bare after backward"].append(reduced)
for i in range(iterations + 10):
    comm.Barrier()
    reduced = timed(lambda: comm.Allreduce(MPI.IN_PLACE, bare, op=MPI.SUM))
    if i >= 10:
        seconds["bare in a tight loop"].append(reduced)
gathered = comm.gather(seconds, root=0)
if rank == 0:
    medians = {}
    for name in seconds:
        per_rank = np.array([ranks[name] for ranks in gathered])
        # Without a barrier every rank but the last to arrive also waits for it: the smallest
        # time of an iteration is the last rank's. Released together, the slowest one counts.
        last = per_rank.max(axis=0) if name == "bare in a tight loop" else per_rank.min(axis=0)
        medians[name] = float(np.median(last))
    medians["values"] = int(gradients.size)
    medians["exchange / bare after backward"] = medians["exchange"] / medians["bare after backward"]
    print(json.dumps(medians))
