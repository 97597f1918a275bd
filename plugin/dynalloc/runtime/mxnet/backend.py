"""What a recorded run does the MXNet way: MPI for the ranks' collectives, Gluon's DynamicBatch,
NDArrays, the trainer's state in checkpoints and Gluon's parameter file at the end. The Recorder
(`runtime.common.recorder`) holds one such backend, or PyTorch's (`runtime.torch.backend`), and is
otherwise the same for both."""

import pickle

import mxnet as mx
import numpy as np
from mpi4py import MPI
from mxnet import autograd, gluon

from dynalloc.core.state import export, restore
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
        if options.pop("scaler") is not None:
            raise DynallocError("start(scaler=) takes PyTorch's GradScaler: an MXNet run has none")
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
        """(parameters, the optimizer's state) as arrays and numbers. MXNet's own way out is
        `trainer.save_states`, a pickle, which loading would have to trust: the updater's
        states, its update counts and its schedule are read here instead."""
        params = {name: p.data().asnumpy() for name, p in net.collect_params().items()}
        optimizer = trainer.optimizer
        states = {index: _arrays(state) for index, state in _updater(trainer).states.items()}
        schedule = optimizer.lr_scheduler
        return params, {
            "states": states,
            "num_update": optimizer.num_update,
            "update_counts": {
                device: dict(counts)  # per device: each parameter's updates
                for device, counts in optimizer._all_index_update_counts.items()
            },
            "schedule": export(schedule) if schedule is not None else None,
        }

    def restore_model(self, net, trainer, scheduler, params, optimizer_state):
        collected = net.collect_params()
        if sorted(collected.keys()) != sorted(params):
            raise DynallocError("the checkpoint's parameters do not match the model's names")
        for name, p in collected.items():
            p.set_data(mx.nd.array(params[name]))
        states = {int(i): _ndarrays(state) for i, state in optimizer_state["states"].items()}
        _updater(trainer)
        for updater in trainer._updaters:  # every context's, as trainer.load_states sets them
            updater.states = dict(states)
            updater.states_synced = dict.fromkeys(states, False)
        optimizer = trainer.optimizer
        optimizer.num_update = int(optimizer_state["num_update"])
        for device, counts in optimizer_state["update_counts"].items():
            mine = optimizer._all_index_update_counts.setdefault(int(device), {})
            mine.update({int(i): int(n) for i, n in counts.items()})  # in place: the optimizer
            # points at each device's counts and would lose a dict put in their place
        if optimizer_state["schedule"] is not None:
            restore(optimizer.lr_scheduler, optimizer_state["schedule"])

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


def _updater(trainer):
    """The trainer's updater, which holds the optimizer's per-parameter states: made on the
    first step, so made here if the trainer has not stepped yet (as save_states makes it)."""
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    return trainer._updaters[0]


def _arrays(state):
    """An optimizer state (an NDArray, a tuple of them, or None) as numpy arrays."""
    if isinstance(state, tuple | list):
        return tuple(_arrays(part) for part in state)
    return None if state is None else state.asnumpy()


def _ndarrays(state):
    if isinstance(state, tuple | list):
        return tuple(_ndarrays(part) for part in state)
    return None if state is None else mx.nd.array(state)


def convert_optimizer_state(states_file):
    """The optimizer state of a checkpoint of the pickled format (`trainer.save_states`'s bytes,
    which `dynalloc convert-checkpoint` was told to trust) as `Backend.model_state` gives it."""
    states, optimizer = pickle.loads(states_file)  # noqa: S301 - trusted by the user
    schedule = optimizer.lr_scheduler
    return {
        "states": {index: _arrays(state) for index, state in states.items()},
        "num_update": optimizer.num_update,
        "update_counts": {device: dict(counts)
                          for device, counts in optimizer._all_index_update_counts.items()},
        "schedule": export(schedule) if schedule is not None else None,
    }  # fmt: skip
