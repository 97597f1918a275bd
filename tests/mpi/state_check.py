"""Run under mpiexec: BatchNorm running statistics differ per rank until average_state()."""

import sys

import mxnet as mx
import numpy as np
from dynalloc.runtime.mxnet.gluon import DynamicBatch
from dynalloc.runtime.mxnet.models import build_model
from mxnet import autograd, gluon

net = build_model("resnet", 10, (1, 8, 8), seed=0)
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
dyn = DynamicBatch(net.collect_params(), trainer, dataset_size=64, global_batch=32, policy="static")
rng = np.random.default_rng(0)
x_all = rng.standard_normal((64, 1, 8, 8)).astype(np.float32)
y_all = rng.integers(0, 10, 64).astype(np.float32)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
for step in dyn.epoch(0):
    x, y = mx.nd.array(x_all[step.indices]), mx.nd.array(y_all[step.indices])
    with step.compute():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
    step.finish(loss)


def running_stats():
    fixed = [p for p in net.collect_params().values() if p.grad_req == "null"]
    return np.concatenate([p.data().asnumpy().ravel() for p in fixed])


before = dyn.exchange.comm.allgather(running_stats())
dyn.average_state()
after = dyn.exchange.comm.allgather(running_stats())
assert not np.allclose(before[0], before[1]), "ranks saw the same samples?"
assert np.allclose(after[0], after[1], atol=1e-6)
np.testing.assert_allclose(after[0], np.mean(before, axis=0), rtol=1e-5, atol=1e-6)
print(f"rank {dyn.rank} ok")
sys.exit(0)
