"""How many bytes a rank's gradient holds, from a network's name: what the Allreduce moves.

core/ cannot import MXNet, so the trainable parameter counts are a table, computed with MXNet
1.9.1 (`tests/unit/test_gradients.py` builds every network in the training environment and
checks that the table has not drifted). The built-ins are counted as the benchmarks train them,
on 1x28x28 images of 10 classes (MNIST, Fashion-MNIST: LeNet's dense layer grows with the
image); the model zoo's networks (`mxnet.gluon.model_zoo.vision`) as the zoo defines them, 1,000
classes on 224x224 images (299x299 for inceptionv3). Gradients are float32, 4 bytes a value.
"""

BYTES_PER_VALUE = 4  # float32 gradients

# Trainable values (parameters with a gradient; BatchNorm's running statistics excluded).
PARAMETERS = {
    "mlp": 109_386,
    "lenet": 1_256_080,
    "resnet": 77_754,
    "alexnet": 61_100_840,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "resnet18_v1": 11_689_512,
    "resnet34_v1": 21_797_672,
    "resnet50_v1": 25_575_912,
    "resnet101_v1": 44_589_800,
    "resnet152_v1": 60_252_648,
    "resnet50_v2": 25_549_480,
    "densenet121": 7_978_856,
    "mobilenet1.0": 4_231_976,
    "mobilenetv2_1.0": 3_504_960,
    "squeezenet1.0": 1_248_424,
    "inceptionv3": 23_834_568,
}

# The input each network of PARAMETERS is counted on (channels, height, width) and its classes.
BUILT_IN_INPUT, ZOO_INPUT, INCEPTION_INPUT = (1, 28, 28), (3, 224, 224), (3, 299, 299)


def counted_on(name):
    """(input shape, classes) that `name`'s entry of PARAMETERS was counted on."""
    if name in ("mlp", "lenet", "resnet"):
        return BUILT_IN_INPUT, 10
    return (INCEPTION_INPUT if name == "inceptionv3" else ZOO_INPUT), 1000


def gradient_bytes(model):
    """Bytes of `model`'s float32 gradient; ValueError names an unknown model."""
    if model not in PARAMETERS:
        raise ValueError(
            f"unknown model {model!r}; give gradient bytes or one of {', '.join(PARAMETERS)}"
        )
    return PARAMETERS[model] * BYTES_PER_VALUE
