"""A Horovod-style face for Gluon, so that a Horovod script ports in a few lines:
`import dynalloc.mxnet as hvd` gives it `init`, `rank`, `size`, `local_rank`,
`broadcast_parameters` and `DistributedTrainer`, a `gluon.Trainer` as `hvd.DistributedTrainer`
is, whose `epoch(epoch, loader)` hands this rank's share of each iteration and whose
`step(loss)` exchanges the share-weighted gradients and updates the parameters.

    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.1},
                                     dataset_size=len(train), global_batch=64 * hvd.size())
    loader = gluon.data.DataLoader(train, batch_sampler=trainer.batch_sampler())
    for epoch in range(epochs):
        for data, label in trainer.epoch(epoch, loader):
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(loss)        # Horovod's step(batch_size): the global batch is fixed

A script that clips its gradients between Gluon's `allreduce_grads()` and `update(batch_size)`
calls `allreduce_grads(loss)` and `update(loss)`. Everything else is `DynamicBatch`'s
(`trainer.dynamic`: its policy, shares and rows).
"""

import numbers
from collections.abc import Mapping

from mpi4py import MPI
from mxnet import gluon

from dynalloc.errors import DynallocError
from dynalloc.runtime.mxnet.exchange import GradientExchange
from dynalloc.runtime.mxnet.gluon import DynamicBatch, numpy_view


def init():
    """Horovod's `hvd.init()`: MPI, which the ranks' launcher (mpiexec, srun) started."""
    if not MPI.Is_initialized():
        MPI.Init()


def rank():
    return MPI.COMM_WORLD.Get_rank()


def size():
    return MPI.COMM_WORLD.Get_size()


def local_rank():
    """This rank's number among the ranks of its node."""
    node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def broadcast_parameters(params, root_rank=0):
    """Give every rank `root_rank`'s values of `params` (a ParameterDict), as Horovod's does.
    Their shapes must be known: a network with deferred shapes runs one forward pass first."""
    try:
        values = [numpy_view(p.data()) for p in _named(params).values()]
    except RuntimeError as error:
        raise DynallocError(f"broadcast_parameters: {error}") from None
    GradientExchange(values, sleep_while_waiting=False).broadcast(root_rank)


def _named(params):
    """A ParameterDict (or other mapping) as it is; a list of parameters by their names."""
    if isinstance(params, Mapping | gluon.ParameterDict):
        return params
    return {p.name: p for p in params}


class DistributedTrainer(gluon.Trainer):
    """A `gluon.Trainer` over MPI ranks whose global batch is split by the allocation policy.
    `optimizer`, `optimizer_params`: as gluon.Trainer takes them; `dataset_size`,
    `global_batch` and any other keyword (`policy`, `seed`, `slowdown`, ...): as
    `DynamicBatch` takes them. Horovod's `compression` and `gradient_predivide_factor` have no
    equivalent: gradients travel as float32, summed once."""

    def __init__(self, params, optimizer, optimizer_params=None, *, dataset_size, global_batch,
                 **options):  # fmt: skip
        super().__init__(params, optimizer, optimizer_params, kvstore=None)
        self.current, self.finishing = None, False
        self.dynamic = DynamicBatch(_named(params), self, dataset_size, global_batch, **options)

    def batch_sampler(self):
        """This rank's share of every iteration, for `gluon.data.DataLoader(batch_sampler=)`."""
        return self.dynamic.batch_sampler()

    def epoch(self, epoch, loader, start=0):
        """The batches of `loader` (built over `batch_sampler()`) in epoch `epoch` from its
        global batch `start`; each ends with `step(loss)`."""
        for step, batch in self.dynamic.epoch(epoch, start, loader):
            self.current = step
            yield batch
            if self.current is not None:
                raise DynallocError("each batch of trainer.epoch() ends with trainer.step(loss)")

    def step(self, loss, ignore_stale_grad=False):
        """Finish this batch's iteration with its per-sample losses (`loss_fn(net(x), y)`):
        exchange the gradients, update, take the next shares; returns the global batch's mean
        loss. Where Horovod's takes a batch size, this takes the losses: the gradients are
        those of the mean over the global batch, fixed at construction."""
        if self.finishing:  # DynamicBatch updating the parameters, through Gluon's own step
            return super().step(loss, ignore_stale_grad)
        step, self.current, self.finishing = self._batch_step("step", loss), None, True
        try:
            return step.finish(loss)
        finally:
            self.finishing = False

    def allreduce_grads(self, loss=None):
        """Gluon's and Horovod's `allreduce_grads()`, for what goes between the exchange and
        the update (clipping by the global norm): with the batch's per-sample losses, exchange
        the gradients now; each `grad()` then holds their sum over the global batch, as under
        Horovod. `update(loss)` (or `step(loss)`) ends the batch."""
        self._batch_step("allreduce_grads", loss).synchronize(loss)

    def update(self, loss, ignore_stale_grad=False):
        """Gluon's `update(batch_size)` after `allreduce_grads`: `step(loss)`."""
        return self.step(loss, ignore_stale_grad)

    def _batch_step(self, call, loss):
        """The step of the batch under way, for `trainer.call(loss)`."""
        if loss is None:
            raise DynallocError(f"trainer.{call}() needs this batch's per-sample losses: "
                                f"trainer.{call}(loss)")  # fmt: skip
        if isinstance(loss, numbers.Number):
            raise DynallocError(
                f"trainer.{call}({loss}): pass this batch's per-sample losses, "
                f"trainer.{call}(loss), not a batch size (the global batch is fixed at "
                "construction)"
            )
        if self.current is None:
            raise DynallocError(f"trainer.{call}(loss) belongs in a batch of trainer.epoch()")
        return self.current
