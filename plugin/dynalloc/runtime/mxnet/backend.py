"""What a recorded run does the MXNet way: MPI for the ranks' collectives, Gluon's DynamicBatch,
NDArrays, the trainer's state in checkpoints and Gluon's parameter file at the end. The Recorder
(`runtime.common.recorder`) holds one such backend, or PyTorch's (`runtime.torch.backend`), and is
otherwise the same for both."""

import tempfile
from pathlib import Path

import mxnet as mx
import numpy as np
from mpi4py import MPI
from mxnet import autograd, gluon

from dynalloc.errors import DynallocError
from dynalloc.runtime.mxnet import loop
from dynalloc.runtime.mxnet.build import build, eval_sums, ndarrays
from dynalloc.runtime.mxnet.gluon import DynamicBatch


class Backend:
    name = "mxnet"
    train = staticmethod(loop.train)  # `dynalloc train`'s loop over the built-in networks

    def __init__(self):
        self.comm = MPI.COMM_WORLD

    def build(self, setup):
        """(network, trainer, scheduler) of the run config; MXNet's schedule lives in the
        trainer's optimizer."""
        return (*build(setup), None)

    def dynamic_batch(self, net, trainer, scheduler, dataset_size, global_batch, **options):
        if scheduler is not None:
            raise DynallocError("an MXNet run's schedule belongs to its optimizer, not start()")
        return DynamicBatch(net.collect_params(), trainer, dataset_size, global_batch,
                            comm=self.comm, **options)  # fmt: skip

    tensors = staticmethod(ndarrays)

    def wait(self):
        mx.nd.waitall()

    def fixed_state(self, dyn):
        """This rank's non-trainable state (BatchNorm statistics) as numpy arrays."""
        return [tensor.copy() for tensor in dyn.state.tensors]

    def set_fixed_state(self, dyn, arrays):
        for tensor, array in zip(dyn.state.tensors, arrays, strict=True):
            tensor[:] = array

    def model_state(self, net, trainer, scheduler):
        with tempfile.TemporaryDirectory() as folder:
            states = Path(folder) / "trainer.states"
            trainer.save_states(str(states))
            trainer_states = states.read_bytes()
        params = {name: p.data().asnumpy() for name, p in net.collect_params().items()}
        return params, trainer_states

    def restore_model(self, net, trainer, scheduler, params, trainer_states):
        collected = net.collect_params()
        if sorted(collected.keys()) != sorted(params):
            raise DynallocError("the checkpoint's parameters do not match the model's names")
        for name, p in collected.items():
            p.set_data(mx.nd.array(params[name]))
        with tempfile.TemporaryDirectory() as folder:
            states = Path(folder) / "trainer.states"
            states.write_bytes(trainer_states)
            trainer.load_states(str(states))

    def probe_pass(self, net, loss_fn, shape, classes):
        """A forward and backward pass of n made-up samples (`Allocation.probe`); numpy draws
        them, so MXNet's random state is untouched."""
        draws = np.random.default_rng(0)

        def forward_backward(n):
            x = mx.nd.array(draws.standard_normal((n, *shape), dtype=np.float32))
            y = mx.nd.array(np.arange(n) % classes)
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()

        return forward_backward

    def default_loss(self):
        return gluon.loss.SoftmaxCrossEntropyLoss()

    def evaluate(self, net, loss_fn, feed, rank, ranks, progress):
        return eval_sums(net, loss_fn, feed, rank, ranks, progress)

    def save(self, net, path):
        net.save_parameters(str(path))

    def reseed(self, value):
        """MXNet's random state cannot be saved: a resumed run reseeds it from the iteration."""
        mx.random.seed(value)
