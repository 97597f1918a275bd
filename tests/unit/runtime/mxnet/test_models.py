"""build_model: shapes, full initialisation, seed determinism, trainability, bad input."""

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from dynalloc.errors import DynallocError  # noqa: E402
from dynalloc.runtime.mxnet.models import MODELS, build_model  # noqa: E402

SHAPES = [(1, 28, 28), (1, 8, 8)]


def parameter_arrays(net):
    return [param.data().asnumpy() for param in net.collect_params().values()]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", MODELS)
def test_builds_initialised_with_class_scores(name, shape):
    net = build_model(name, 10, shape, seed=0)
    assert isinstance(net, mx.gluon.HybridBlock)
    for param in net.collect_params().values():
        assert param._data is not None, f"{param.name} not initialised"
        assert 0 not in param.shape
        assert np.isfinite(param.data().asnumpy()).all()
    out = net(mx.nd.random.uniform(shape=(3, *shape)))
    assert out.shape == (3, 10)


@pytest.mark.parametrize("name", MODELS)
def test_same_seed_same_parameters_other_seed_differs(name):
    first = build_model(name, 10, (1, 8, 8), seed=7)
    mx.random.seed(123)  # disturb the global generator between builds
    mx.nd.random.uniform(shape=(100,)).wait_to_read()
    second = build_model(name, 10, (1, 8, 8), seed=7)
    other = build_model(name, 10, (1, 8, 8), seed=8)
    assert list(first.collect_params()) == list(second.collect_params())
    for a, b in zip(parameter_arrays(first), parameter_arrays(second), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(parameter_arrays(first), parameter_arrays(other), strict=True)
    )


def test_one_sgd_step_reduces_mlp_loss():
    net = build_model("mlp", 10, (1, 8, 8), seed=0)
    rng = np.random.default_rng(0)
    data = mx.nd.array(rng.standard_normal((16, 1, 8, 8)), dtype="float32")
    label = mx.nd.array(rng.integers(0, 10, 16), dtype="float32")
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with mx.autograd.record():
        loss = loss_fn(net(data), label).mean()
    loss.backward()
    trainer.step(1)
    after = loss_fn(net(data), label).mean()
    assert after.asscalar() < loss.asscalar()


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_trainable_parameter(name):
    net = build_model(name, 10, (1, 8, 8), seed=0)
    with mx.autograd.record():
        loss = net(mx.nd.ones((4, 1, 8, 8))).sum()
    loss.backward()
    grads = [p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]
    assert grads and all(np.isfinite(g).all() for g in grads)


def test_unknown_model_names_it_and_lists_models():
    with pytest.raises(DynallocError, match="vgg") as info:
        build_model("vgg", 10, (1, 28, 28), seed=0)
    assert all(name in str(info.value) for name in MODELS)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"classes": 0}, "classes"),
        ({"input_shape": (28, 28)}, "input_shape"),
        ({"input_shape": (1, 2, 2)}, "too small"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_raise(kwargs, fragment):
    args = {"name": "lenet", "classes": 10, "input_shape": (1, 28, 28), "seed": 0} | kwargs
    with pytest.raises(DynallocError, match=fragment):
        build_model(**args)
