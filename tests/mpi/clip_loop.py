"""A Gluon loop that clips its gradients by their global norm between the exchange and the
step, as docs/own-training.md has it, on any number of MPI ranks:

    mpiexec -n R python clip_loop.py OUT [--face dynamic|trainer|early] [--slow RANK=FACTOR]

`dynamic`: `step.synchronize(loss)`, `gluon.utils.clip_global_norm`, `step.finish(loss)`;
`trainer`: the Horovod face, `trainer.allreduce_grads(loss)`, the clip, `trainer.update(loss)`;
`early`: the mistake, each rank's own gradients clipped before `step.finish(loss)`. A small
tanh MLP (no kink where float32 rounding could send two runs down different branches) on 640
random samples, global batch 64, 2 epochs, `adaptive`. Rank 0 saves the final parameters
(OUT.npy), its shares (OUT.shares.json) and how many iterations the clip bound
(OUT.clipped.json).
"""

import argparse
import json

import mxnet as mx
import numpy as np
from dynalloc.mxnet import DistributedTrainer, DynamicBatch, rank
from mxnet import autograd, gluon

MAX_NORM = 0.5  # of the mean loss's gradient: it binds in most iterations
BATCH = 64

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--face", default="dynamic", choices=["dynamic", "trainer", "early"])
parser.add_argument("--slow", default="0=1", help="RANK=FACTOR")
args = parser.parse_args()

mx.random.seed(0)
net = gluon.nn.Sequential()
net.add(gluon.nn.Dense(32, activation="tanh"), gluon.nn.Dense(10))
net.initialize(mx.init.Xavier())
net(mx.nd.zeros((1, 20)))
params = net.collect_params()
data = np.random.default_rng(0)
x_all = data.normal(size=(640, 20)).astype(np.float32)
y_all = data.integers(0, 10, 640).astype(np.float32)
slow_rank, factor = (float(v) for v in args.slow.split("="))
options = dict(policy="adaptive", seed=0, slowdown=lambda i: factor if rank() == slow_rank else 1)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()


def clip(size=BATCH):
    """The gradients hold their sum over the global batch's `size` samples: the mean loss's
    norm is theirs over B, so the bound is MAX_NORM times B (as under Horovod and GluonNLP)."""
    return gluon.utils.clip_global_norm(grads, MAX_NORM * size) > MAX_NORM * size


clipped = 0
if args.face == "trainer":
    trainer = DistributedTrainer(params, "sgd", {"learning_rate": 0.5}, dataset_size=640,
                                 global_batch=BATCH, **options)  # fmt: skip
    dyn = trainer.dynamic
    grads = [p.grad() for p in params.values()]  # views of the one array of gradients
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x_all, y_all),
                                   batch_sampler=trainer.batch_sampler())  # fmt: skip
    for epoch in range(2):
        for x, y in trainer.epoch(epoch, loader):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.allreduce_grads(loss)
            clipped += clip()
            trainer.update(loss)
else:
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.5})
    dyn = DynamicBatch(params, trainer, 640, BATCH, **options)
    grads = [p.grad() for p in params.values()]
    for epoch in range(2):
        for step in dyn.epoch(epoch):
            x, y = mx.nd.array(x_all[step.indices]), mx.nd.array(y_all[step.indices])
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            if args.face == "dynamic":
                step.synchronize(loss)
            clipped += clip(step.size)
            step.finish(loss)
if dyn.rank == 0:
    np.save(
        f"{args.out}.npy", np.concatenate([p.data().asnumpy().ravel() for p in params.values()])
    )
    with open(f"{args.out}.shares.json", "w") as out:
        json.dump([row.batch_size for row in dyn.rows], out)
    with open(f"{args.out}.clipped.json", "w") as out:
        json.dump(int(clipped), out)
