"""`dynalloc.core.gradients`: the table of parameter counts cannot drift from the networks
MXNet builds (core/ cannot import MXNet, so this test, in the training environment, builds every
network of the table and counts what has a gradient)."""

import mxnet as mx
import numpy as np
import pytest
from dynalloc.core.gradients import PARAMETERS, counted_on, gradient_bytes
from dynalloc.runtime.mxnet.networks import BUILDERS
from mxnet.gluon.model_zoo import vision


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_the_table_counts_what_mxnet_builds(name):
    shape, classes = counted_on(name)
    net = BUILDERS[name](classes) if name in BUILDERS else vision.get_model(name, classes=classes)
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, *shape)))  # deferred initialisation: the shapes follow the input
    trainable = net.collect_params().values()
    count = sum(int(np.prod(p.shape)) for p in trainable if p.grad_req != "null")
    assert PARAMETERS[name] == count


def test_every_built_in_network_is_in_the_table():
    assert set(BUILDERS) <= set(PARAMETERS)


def test_gradient_bytes_are_float32_values():
    assert gradient_bytes("lenet") == 4 * 1_256_080  # the "5 MB" of LeNet's exchange
    with pytest.raises(ValueError, match="unknown model 'gpt5'"):
        gradient_bytes("gpt5")
