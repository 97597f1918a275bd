"""The small Gluon models the benchmarks train, built identically on every rank.

Every rank builds its own replica, and synchronous data parallelism only averages gradients, so
the replicas must start from bit-identical parameters: `build_model` seeds MXNet's generator,
uses a fixed initializer and materialises every parameter before it returns.
"""

import mxnet as mx
from mxnet.gluon import HybridBlock, nn

from dynalloc.errors import DynallocError

MODELS = ("mlp", "lenet", "resnet")


def _mlp(classes):
    net = nn.HybridSequential(prefix="mlp_")
    with net.name_scope():
        net.add(
            nn.Flatten(),
            nn.Dense(128, activation="relu"),
            nn.Dense(64, activation="relu"),
            nn.Dense(classes),
        )
    return net


def _lenet(classes):
    # Padding 2 keeps the 5x5 convolutions size-preserving, so 8x8 inputs survive both poolings.
    net = nn.HybridSequential(prefix="lenet_")
    with net.name_scope():
        net.add(
            nn.Conv2D(20, 5, padding=2, activation="relu"),
            nn.MaxPool2D(2),
            nn.Conv2D(50, 5, padding=2, activation="relu"),
            nn.MaxPool2D(2),
            nn.Dense(500, activation="relu"),
            nn.Dense(classes),
        )
    return net


class _BasicBlock(HybridBlock):
    """Two 3x3 conv + BatchNorm layers plus a shortcut; 1x1 projection when the shape changes."""

    def __init__(self, channels, stride, in_channels, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.HybridSequential()
            self.body.add(
                nn.Conv2D(channels, 3, strides=stride, padding=1, use_bias=False),
                nn.BatchNorm(),
                nn.Activation("relu"),
                nn.Conv2D(channels, 3, padding=1, use_bias=False),
                nn.BatchNorm(),
            )
            self.shortcut = None
            if stride != 1 or channels != in_channels:
                self.shortcut = nn.HybridSequential()
                self.shortcut.add(
                    nn.Conv2D(channels, 1, strides=stride, use_bias=False),
                    nn.BatchNorm(),
                )

    def hybrid_forward(self, F, x):
        residual = x if self.shortcut is None else self.shortcut(x)
        return F.Activation(self.body(x) + residual, act_type="relu")


def _resnet(classes):
    net = nn.HybridSequential(prefix="resnet_")
    with net.name_scope():
        net.add(
            nn.Conv2D(16, 3, padding=1, use_bias=False),
            nn.BatchNorm(),
            nn.Activation("relu"),
        )
        in_channels = 16
        for stage, (channels, stride) in enumerate(((16, 1), (32, 2), (64, 2))):
            net.add(_BasicBlock(channels, stride, in_channels, prefix=f"stage{stage + 1}_"))
            in_channels = channels
        net.add(nn.GlobalAvgPool2D(), nn.Dense(classes))
    return net


_BUILDERS = {"mlp": _mlp, "lenet": _lenet, "resnet": _resnet}
# Smallest height and width each model accepts: LeNet's two 2x2 poolings need 4 pixels.
_MIN_SIZE = {"mlp": 1, "lenet": 4, "resnet": 1}


def _check_int(key, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DynallocError(f"{key} must be an integer >= {minimum}, got {value!r}")


def build_model(name, classes, input_shape, seed):
    """An initialised, hybridized model whose parameters depend only on `seed`.

    `input_shape` is one sample's (channels, height, width). A forward pass on a zero batch
    resolves Gluon's deferred shapes, so every parameter is allocated on return.
    """
    if name not in MODELS:
        raise DynallocError(
            f"model.name: unknown model {name!r}; choose one of {', '.join(MODELS)}"
        )
    _check_int("classes", classes, 1)
    input_shape = tuple(input_shape)
    if len(input_shape) != 3:
        raise DynallocError(f"input_shape must be (channels, height, width), got {input_shape!r}")
    for size in input_shape:
        _check_int("input_shape", size, 1)
    if min(input_shape[1:]) < _MIN_SIZE[name]:
        raise DynallocError(
            f"input_shape {input_shape!r} is too small for model {name!r}: "
            f"height and width must be >= {_MIN_SIZE[name]}"
        )
    _check_int("seed", seed, 0)

    net = _BUILDERS[name](classes)
    mx.random.seed(seed)
    net.initialize(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), ctx=mx.cpu())
    net.hybridize()
    net(mx.nd.zeros((1, *input_shape), ctx=mx.cpu())).wait_to_read()
    return net
