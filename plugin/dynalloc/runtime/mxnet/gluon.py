"""MXNet Gluon integration: a few lines in the user's own training loop.

    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    dyn = DynamicBatch(net.collect_params(), trainer, dataset_size=len(train_x),
                       global_batch=512, policy="adaptive", seed=0)
    for epoch in range(epochs):
        for step in dyn.epoch(epoch):
            x, y = mx.nd.array(train_x[step.indices]), mx.nd.array(train_y[step.indices])
            with step.compute():                 # timed: forward + backward of this share
                with autograd.record():
                    loss = loss_fn(net(x), y)    # per-sample losses, as Gluon returns them
                loss.backward()
            step.finish(loss)                    # weighted allreduce, trainer.step, new shares

The user's optimizer and trainer are used as they are: the exchange leaves in every gradient the
sum over the ranks of the gradients of their summed losses, and `trainer.step(B)` applies it as
the gradient of the mean loss over the whole global batch, with the optimizer's own
`rescale_grad`. Nothing in MXNet is patched.
"""

import ctypes
import math

import mxnet as mx
import numpy as np
from mpi4py import MPI
from mxnet.base import _LIB, check_call

from dynalloc.errors import DynallocError, SharedError
from dynalloc.runtime.common.allocation import RANK_VALUES, Allocation, folded
from dynalloc.runtime.common.heap import hold_freed_memory
from dynalloc.runtime.common.step import Step as BaseStep
from dynalloc.runtime.mxnet.exchange import GradientExchange

FLOAT32 = 0  # MXNet's type flag of float32 (mshadow's kFloat32)


def numpy_view(array):
    """A writable numpy array over a dense float32 CPU NDArray's memory (MXNet's C API
    `MXNDArrayGetData`): the exchange then reads and writes gradients without copies."""
    if array.dtype != np.float32 or array.stype != "default" or array.context.device_type != "cpu":
        raise DynallocError(
            f"only dense float32 CPU parameters are supported, got {array.dtype} "
            f"{array.stype} on {array.context}"
        )
    array.wait_to_read()
    pointer = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(pointer)))
    memory = (ctypes.c_float * array.size).from_address(pointer.value)
    return np.frombuffer(memory, dtype=np.float32).reshape(array.shape)


def gradients_in_one_array(params, extra=0):
    """Rebind the gradients of `params` to consecutive views of one float32 array, and return
    it: the exchange then sums every gradient in one in-place Allreduce of that array, with no
    packing pass and one collective in all (PyTorch DDP's `gradient_as_bucket_view`). `extra`
    values after the gradients carry the ranks' `RANK_VALUES` in the same Allreduce. Gluon has
    no public way to give a parameter its gradient array, so this does what its own
    `Parameter._init_grad` does: sets `_grad` and marks it with `autograd.mark_variables`. Every
    gradient then lives in one engine variable, so MXNet runs their writes one after the other,
    as one CPU worker thread does anyway."""
    gradients = mx.nd.zeros(sum(p.data().size for p in params) + extra, dtype=np.float32)
    start = 0
    for p in params:
        view = gradients[start : start + p.data().size].reshape(p.shape)
        view[:] = p.grad()
        p._grad = [view]
        mx.autograd.mark_variables([p.data()], [view], grad_reqs=p.grad_req)
        start += p.data().size
    return gradients


class LossReader:
    """The mean of Gluon's per-sample losses, read through MXNet's C API into one float32
    array kept for the run: `NDArray.shape` and `.asnumpy().mean()` cost 40-47 us an iteration
    with the caches a backward pass leaves (six C calls through their Python wrappers, and a new
    array), against 11-17 us so (timed after a backward pass, and inside a 1 ms loop)."""

    def __init__(self, most):
        self.values = np.empty(most, dtype=np.float32)
        self.pointer = ctypes.c_void_p(self.values.ctypes.data)
        wide = mx.runtime.Features().is_enabled("INT64_TENSOR_SIZE")  # shapes in int64
        self.ndim, self.dtype = ctypes.c_int(), ctypes.c_int()
        self.dims = ctypes.POINTER(ctypes.c_int64 if wide else ctypes.c_int)()
        self.get_shape = _LIB.MXNDArrayGetShapeEx64 if wide else _LIB.MXNDArrayGetShapeEx
        self.shape_out = ctypes.byref(self.ndim), ctypes.byref(self.dims)
        self.dtype_out = ctypes.byref(self.dtype)

    def mean(self, loss, share):
        """The mean of `loss`'s values, or None where it is not an NDArray of `share` rows."""
        if not isinstance(loss, mx.nd.NDArray):
            return None
        check_call(self.get_shape(loss.handle, *self.shape_out))
        ndim = self.ndim.value
        if ndim < 1 or self.dims[0] != share:
            return None
        size = math.prod(self.dims[:ndim])
        check_call(_LIB.MXNDArrayGetDType(loss.handle, self.dtype_out))
        if self.dtype.value != FLOAT32 or size > self.values.size:  # another dtype; a row each
            return float(loss.asnumpy().mean(dtype=np.float64))
        # A synchronous copy: it waits for the loss, as asnumpy() does.
        check_call(_LIB.MXNDArraySyncCopyToCPU(loss.handle, self.pointer, ctypes.c_size_t(size)))
        return math.fsum(self.values[:size].tolist()) / size


class Step(BaseStep):
    """One iteration of one rank under Gluon: `synchronize` and `finish` take Gluon's per-sample
    losses. After `synchronize`, each parameter's `grad()` holds the sum over the global batch
    of the gradients of its samples' losses, which `finish` steps with `trainer.step(B)`."""

    def own_loss(self, loss, call):
        """The mean of `loss`, one value per sample of this rank's share, as a Gluon loss
        returns it: the exchange weights each rank's gradient of the summed loss by 1 / B, so a
        gradient of the mean (`.mean()` before `backward()`) would be weighted wrongly, and
        training silently worse."""
        mean = self.owner.losses.mean(loss, self.share)
        if mean is None:
            got = f"shape {loss.shape}" if isinstance(loss, mx.nd.NDArray) else type(loss).__name__
            raise SharedError(
                f"step.{call}() needs an NDArray of one loss per sample of this rank's share "
                f"({self.share}), got {got}: backward() and pass the per-sample losses "
                "`loss_fn(net(x), y)` themselves, without .mean() or .sum()"
            )
        return mean


class DynamicBatch(Allocation):
    """Hands each rank its samples per iteration, times its compute, exchanges the weighted
    gradients, steps the trainer and feeds the allocation policy (`Allocation`: the policy,
    slowdown, sampler and rows). A network with BatchNorm (running statistics among its
    parameters) keeps at least 8 samples per rank. The process keeps the memory its iterations
    free (`runtime.common.heap`: MXNet's CPU arrays come from malloc); `hold_memory=False`
    leaves the C library's malloc as it is."""

    Step = Step

    def __init__(
        self,
        params,
        trainer,
        dataset_size,
        global_batch,
        *,
        policy="adaptive",
        seed=0,
        min_share=1,
        max_share=None,
        drop_last=False,
        slowdown=None,
        comm=None,
        sampler=None,
        pin_cores=True,
        threads_per_rank=1,
        hold_memory=True,
    ):
        if hold_memory:
            hold_freed_memory()
        comm = MPI.COMM_WORLD if comm is None else comm
        trainable = [p for p in params.values() if p.grad_req != "null"]
        fixed = [p for p in params.values() if p.grad_req == "null"]  # e.g. BatchNorm statistics
        try:
            for p in trainable:
                numpy_view(p.grad())  # a gradient the exchange can reduce in place
            gradients = gradients_in_one_array(trainable, len(RANK_VALUES) * comm.Get_size())
            # The views alias MXNet's memory: keep the arrays themselves alive beside them.
            self.arrays = [gradients] + [p.data() for p in params.values()]
            grads = [numpy_view(gradients)]
            self.tail = grads[0][-len(RANK_VALUES) * comm.Get_size() :]  # the ranks' values
            data = [numpy_view(p.data()) for p in params.values()]
            state = [numpy_view(p.data()) for p in fixed]
        except RuntimeError as error:
            raise DynallocError(
                "initialise the network (and run one forward pass if it has "
                f"deferred shapes) before DynamicBatch: {error}"
            ) from None
        self.exchange = GradientExchange(grads, comm)
        comm, sleeps = self.exchange.comm, self.exchange.sleep_while_waiting
        GradientExchange(data, comm, sleeps).broadcast()  # all ranks start from rank 0
        self.state = GradientExchange(state, comm, sleeps)
        super().__init__(
            self.exchange.rank, self.exchange.size, dataset_size, global_batch,
            policy=policy, seed=seed, min_share=min_share, max_share=max_share,
            drop_last=drop_last, slowdown=slowdown, sampler=sampler,
            batchnorm=any(name.endswith("running_mean") for name in params),
            pin_cores=pin_cores, threads_per_rank=threads_per_rank,
        )  # fmt: skip
        self.trainer, self.updates = trainer, trainer.optimizer.num_update
        self.losses = LossReader(global_batch)

    def average_state(self):
        """Average the parameters that no gradient updates (BatchNorm running statistics, which
        each rank gathers from its own samples) over the ranks, so that every rank evaluates
        and saves the same model. Call it before evaluating or saving."""
        mx.nd.waitall()
        self.state.allreduce(1.0 / self.ranks)

    def wait_for_device(self):
        mx.nd.waitall()

    def set_threads(self, threads):
        check_call(_LIB.MXSetNumOMPThreads(ctypes.c_int(threads)))

    def gather(self, values):
        return self.exchange.allgather(values)

    def save_state(self):
        mx.nd.waitall()
        return [tensor.copy() for tensor in self.state.tensors]

    def restore_state(self, saved):
        mx.nd.waitall()
        for tensor, values in zip(self.state.tensors, saved, strict=True):
            tensor[:] = values

    def zero_gradients(self):
        mx.nd.waitall()
        for gradients in self.exchange.tensors:
            gradients[:] = 0.0

    def _step(self, batch):
        """trainer.step(batch). A script's own trainer.step() left in (from a Horovod or
        dist_sync script) would apply the gradients twice: Gluon refuses the second step on
        stale gradients; where the script's came first, this names the fix (every rank is at
        the same point)."""
        stepped = self.trainer.optimizer.num_update
        try:
            self.trainer.step(batch)
        except UserWarning:  # Gluon's stale gradient
            if stepped == self.updates:
                raise
            raise SharedError(
                "trainer.step() called besides step.finish(loss), which steps the trainer "
                "itself: remove your trainer.step()"
            ) from None
        self.updates = self.trainer.optimizer.num_update

    def _exchange(self, step, loss):
        # Gluon's backward gives the gradient of the sum over a rank's samples: summed over the
        # ranks that is B times the mean's, which trainer.step(B) scales by the optimizer's own
        # rescale_grad / B, inside its update (no pass of its own over the gradients).
        # The exchange reads and writes the gradients' memory outside MXNet's engine: first
        # any write to them still queued (an op of the loop's own since compute()) is done.
        self.arrays[0].wait_to_read()
        self.tail[:] = folded(self.own_values(step, loss), self.rank, self.ranks)
        sync_s = self.exchange.allreduce()
        return sync_s, self.tail.reshape(self.ranks, len(RANK_VALUES)).tolist()

    def _finish(self, step, sync_s, rows):
        self._step(step.size)
        mx.nd.waitall()
        return self.settle(step, sync_s, rows)
