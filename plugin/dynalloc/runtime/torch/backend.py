"""What a recorded run does the PyTorch way: torch.distributed for every collective (gradients
and the Recorder's own), PyTorch's DynamicBatch and tensors, the optimizer's and scheduler's
state in checkpoints, and `torch.save` of the state dict as the run's final `model.params`.
The counterpart of `runtime.mxnet.backend`."""

import io

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from dynalloc.experiment.script_spec import built_by_dynalloc
from dynalloc.runtime.torch import loop
from dynalloc.runtime.torch.batch import DynamicBatch
from dynalloc.runtime.torch.comm import TorchComm
from dynalloc.runtime.torch.launch import init_process_group
from dynalloc.runtime.torch.models import build_model
from dynalloc.runtime.torch.optim import build_optimizer


class Backend:
    name = "torch"
    train = staticmethod(loop.train)

    def __init__(self):
        # The built-in loop trains on the CPU (its tensors are numpy's), so its collectives go
        # over gloo even where CUDA is, whose NCCL would refuse CPU tensors. Compute threads:
        # OMP_NUM_THREADS, set by `dynalloc train` before torch loaded.
        init_process_group("gloo")
        self.comm = TorchComm()

    def build(self, setup):
        """(network, optimizer, scheduler) of the run config. On several ranks the network is
        wrapped in DistributedDataParallel, whose gradients the share-weighted hook sums while
        the backward pass still runs; the loop calls the wrapper, the rest its `module`."""
        config = setup.config
        net = build_model(built_by_dynalloc(config, "model"), setup.data.classes,
                          setup.input_shape, config["seed"], config["python_path"])  # fmt: skip
        optimizer, scheduler = build_optimizer(
            built_by_dynalloc(config, "optimizer"), setup.total, net.parameters()
        )
        if self.comm.Get_size() > 1:
            net = DistributedDataParallel(net)
        return net, optimizer, scheduler

    def dynamic_batch(self, net, optimizer, scheduler, dataset_size, global_batch, **options):
        return DynamicBatch(net, optimizer, dataset_size, global_batch, scheduler=scheduler,
                            **options)  # fmt: skip

    def tensors(self, x, y):
        # A copy: a staged dataset's arrays are read-only memory maps, which torch warns of.
        return (torch.from_numpy(np.array(x, dtype=np.float32)),
                torch.from_numpy(np.asarray(y).astype(np.int64)))  # fmt: skip

    def wait(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def fixed_state(self, dyn):
        """This rank's floating-point buffers (BatchNorm statistics) as numpy arrays."""
        return [b.detach().cpu().numpy().copy() for b in _floating(dyn.module)]

    def set_fixed_state(self, dyn, arrays):
        for buffer, array in zip(_floating(dyn.module), arrays, strict=True):
            buffer.data.copy_(torch.from_numpy(array))

    def model_state(self, net, optimizer, scheduler):
        """(parameters, the optimizer's and schedule's state dicts) with numpy arrays for the
        tensors: plain data, which resuming loads without running code (no torch.load)."""
        module = getattr(net, "module", net)
        params = {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}
        schedule = scheduler.state_dict() if scheduler else None
        return params, {"optimizer": _numpy(optimizer.state_dict()), "scheduler": schedule}

    def restore_model(self, net, optimizer, scheduler, params, optimizer_state):
        module = getattr(net, "module", net)
        module.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
        optimizer.load_state_dict(_tensors(optimizer_state["optimizer"]))
        if scheduler is not None and optimizer_state["scheduler"] is not None:
            scheduler.load_state_dict(optimizer_state["scheduler"])

    def probe_pass(self, net, loss_fn, shape, classes):
        """A forward and backward pass of n made-up samples (`Allocation.probe`), through the
        module itself: DDP's wrapper would exchange the probe's gradients."""
        module, draws = getattr(net, "module", net), np.random.default_rng(0)

        def forward_backward(n):
            x = torch.from_numpy(draws.standard_normal((n, *shape), dtype=np.float32))
            y = torch.from_numpy(np.arange(n) % classes)
            loss_fn(module(x), y).backward()

        return forward_backward

    def default_loss(self):
        return torch.nn.CrossEntropyLoss()

    def evaluate(self, net, loss_fn, feed, rank, ranks, progress):
        """[summed loss, correct predictions] over rank's slice of the test set (through the
        module itself: DDP's forward would broadcast buffers, a collective, per batch)."""
        net = getattr(net, "module", net)
        loss_sum = correct = 0.0
        net.eval()
        with torch.no_grad():
            for x, y in feed.test_batches(rank, ranks):
                out = net(x)
                losses = loss_fn(out, y)
                mean = getattr(loss_fn, "reduction", "mean") == "mean"
                loss_sum += float(losses.sum()) * (len(y) if mean else 1)
                correct += float((out.argmax(dim=1) == y).sum())
                if progress is not None:
                    progress()
        net.train()
        return [loss_sum, correct]

    def save(self, net, path):
        torch.save(getattr(net, "module", net).state_dict(), path)

    def reseed(self, value):
        torch.manual_seed(value)


def _floating(module):
    return [b for b in module.buffers() if b.is_floating_point()]


def _numpy(tree):
    """A state dict with its tensors as numpy arrays (dicts, lists and numbers kept)."""
    if torch.is_tensor(tree):
        return tree.detach().cpu().numpy().copy()
    if isinstance(tree, dict):
        return {key: _numpy(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_numpy(item) for item in tree)
    return tree


def _tensors(tree):
    if isinstance(tree, np.ndarray):
        return torch.from_numpy(tree)
    if isinstance(tree, dict):
        return {key: _tensors(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_tensors(item) for item in tree)
    return tree


def convert_optimizer_state(states_file):
    """The optimizer state of a checkpoint of the pickled format (the bytes of `torch.save`,
    which `dynalloc convert-checkpoint` was told to trust) as `Backend.model_state` gives it."""
    saved = torch.load(io.BytesIO(states_file), weights_only=False)  # trusted by the user
    return {"optimizer": _numpy(saved["optimizer"]), "scheduler": saved["scheduler"]}
