"""The built-in networks of `dynalloc train` (`model: mlp`, `lenet` or `resnet`): small Gluon
models for the benchmarks, each `BUILDERS[name](classes)`, uninitialised; `runtime.mxnet.models`
builds, initialises and checks them like any other network."""

from mxnet.gluon import HybridBlock, nn


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


BUILDERS = {"mlp": _mlp, "lenet": _lenet, "resnet": _resnet}
# Smallest height and width each model accepts: LeNet's two 2x2 poolings need 4 pixels.
MIN_SIZE = {"mlp": 1, "lenet": 4, "resnet": 1}
