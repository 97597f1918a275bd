"""The network of a `framework: torch` run: the built-ins with the layers of their Gluon twins
(`runtime.mxnet.networks`), or a user's factory returning a `torch.nn.Module`, built identically on
every rank (seeded; the built-ins initialised as the Gluon path initialises: Kaiming-normal
weights over the fan-in, which is MXNet's Xavier(gaussian, in, 2), zero biases), and checked on
one zero sample as `runtime.mxnet.models` checks a Gluon network. MXNet's model zoo is MXNet's: a
torch run names its own networks through `factory:`."""

import functools

import torch
from torch import nn

from dynalloc.errors import DynallocError
from dynalloc.experiment.model_spec import check_model, model_name
from dynalloc.runtime.common.factory import factory, one_line

MIN_SIZE = {"mlp": 1, "lenet": 4, "resnet": 1}  # as the Gluon twins: LeNet's poolings need 4


def _mlp(classes, channels, height, width):
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(channels * height * width, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, classes),
    )  # fmt: skip


def _lenet(classes, channels, height, width):
    # Padding 2 keeps the 5x5 convolutions size-preserving, so 8x8 inputs survive both poolings.
    return nn.Sequential(
        nn.Conv2d(channels, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(50 * (height // 4) * (width // 4), 500), nn.ReLU(),
        nn.Linear(500, classes),
    )  # fmt: skip


class _BasicBlock(nn.Module):
    """Two 3x3 conv + BatchNorm layers plus a shortcut; 1x1 projection when the shape changes."""

    def __init__(self, channels, stride, in_channels):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(channels), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )  # fmt: skip
        self.shortcut = None
        if stride != 1 or channels != in_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(channels),
            )

    def forward(self, x):
        residual = x if self.shortcut is None else self.shortcut(x)
        return torch.relu(self.body(x) + residual)


def _resnet(classes, channels, height, width):
    layers = [nn.Conv2d(channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    in_channels = 16
    for out, stride in ((16, 1), (32, 2), (64, 2)):
        layers.append(_BasicBlock(out, stride, in_channels))
        in_channels = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


BUILDERS = {"mlp": _mlp, "lenet": _lenet, "resnet": _resnet}


def build_model(name, classes, input_shape, seed, python_path=()):
    """A module whose parameters depend only on `name`, `input_shape` and `seed` (the run
    config's `model`: a built-in's name or a `factory` mapping); one forward pass on a zero
    sample must give one score per class."""
    check_model(name)
    input_shape = tuple(input_shape)
    if isinstance(name, str):
        if name not in BUILDERS:
            raise DynallocError(
                f"model: unknown model {name!r}; choose one of {', '.join(BUILDERS)}, or "
                "{factory: 'package.module:function'} for a torch.nn.Module of your own"
            )
        if min(input_shape[1:]) < MIN_SIZE[name]:
            raise DynallocError(
                f"input_shape {input_shape!r} is too small for model {name!r}: "
                f"height and width must be >= {MIN_SIZE[name]}"
            )
        make = functools.partial(BUILDERS[name], classes, *input_shape)
    elif "zoo" in name:
        raise DynallocError(
            "model.zoo names a network of MXNet's model zoo; a framework: torch run takes "
            "{factory: 'package.module:function'} returning a torch.nn.Module"
        )
    else:
        args = dict(name.get("args") or {})
        make = factory(
            name["factory"], classes, input_shape, args, python_path, nn.Module,
            "a torch.nn.Module",
        )  # fmt: skip
    torch.manual_seed(seed)  # a factory's own initialisation is seeded, and kept
    net = make()
    if isinstance(name, str):
        torch.manual_seed(seed)
        _initialise(net)
    _check(net, model_name(name), classes, input_shape)
    return net


def _initialise(net):
    for module in net.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)


def _check(net, name, classes, input_shape):
    shape = (1, *input_shape)
    try:
        net.eval()
        with torch.no_grad():
            out = net(torch.zeros(shape))
        net.train()
    except Exception as error:  # noqa: BLE001 - whatever the network raises
        raise DynallocError(
            f"model: {name} fails to run on one sample of shape {shape}: {one_line(error)}"
        ) from None
    got = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
    if got != (1, classes):
        raise DynallocError(
            f"model: {name} gives {got} on one sample of shape {shape}, not (1, {classes}): "
            f"one score for each of the dataset's {classes} classes"
        )
