"""build_model with `{zoo: ...}` and `{factory: ...}` specs: networks of MXNet's model zoo and a
user's function, built identically every time, and every bad spec named in one line."""

import sys
import textwrap
import time

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from dynalloc.errors import DynallocError  # noqa: E402
from dynalloc.runtime.mxnet.models import MODELS, build_model, zoo_names  # noqa: E402
from dynalloc.runtime.mxnet.networks import BUILDERS, MIN_SIZE  # noqa: E402

FACTORIES = """
from mxnet.gluon import nn

def small(classes, input_shape, width=16):
    assert len(input_shape) == 3
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, padding=1, activation="relu"), nn.Dense(width, activation="relu"),
            nn.Dense(classes))
    return net

def plain_block(classes, input_shape):
    class Net(nn.Block):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(classes)

        def forward(self, x):
            return self.dense(x)

    return Net()

def not_a_block(classes, input_shape):
    return "a network"

def too_many_columns(classes, input_shape):
    return nn.Dense(classes + 1)

def two_outputs(classes, input_shape):
    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(classes)

        def hybrid_forward(self, F, x):
            return self.dense(x), self.dense(x)

    return Net()

def broken(classes, input_shape):
    raise RuntimeError("no network today")

NOT_CALLABLE = 3
"""


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """A module `netfactories_<n>` in a temporary directory, not yet on sys.path; sys.path and
    sys.modules are restored after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"netfactories_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(FACTORIES))
    (tmp_path / "broken_import.py").write_text("import no_such_module_anywhere\n")
    (tmp_path / "bad_syntax.py").write_text("def f(:\n")
    yield name, str(tmp_path)
    for module in (name, "broken_import", "bad_syntax"):
        sys.modules.pop(module, None)


def parameter_arrays(net):
    return [param.data().asnumpy() for param in net.collect_params().values()]


def assert_same_parameters(first, second):
    assert list(first.collect_params()) == list(second.collect_params())
    for a, b in zip(parameter_arrays(first), parameter_arrays(second), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_built_in_names_are_the_built_networks():
    assert set(MODELS) == set(BUILDERS) == set(MIN_SIZE)


@pytest.mark.parametrize(
    ("name", "shape"), [("resnet18_v1", (1, 28, 28)), ("mobilenet0.25", (3, 32, 32))]
)
def test_zoo_network_builds_initialised_with_the_dataset_classes(name, shape):
    began = time.perf_counter()
    net = build_model({"zoo": name}, 10, shape, seed=0)
    built = time.perf_counter() - began
    for param in net.collect_params().values():
        assert param._data is not None, f"{param.name} not initialised"
        assert np.isfinite(param.data().asnumpy()).all()
    assert net(mx.nd.random.uniform(shape=(2, *shape))).shape == (2, 10)
    size = sum(p.data().size for p in net.collect_params().values())
    print(f"{name} on {shape}: {size} parameters, built in {built:.2f} s")
    assert size < 12_000_000  # the time is printed, not asserted: this machine's load varies


def test_zoo_args_reach_the_network_and_classes_may_be_given():
    stem = build_model({"zoo": "resnet18_v1"}, 10, (1, 8, 8), 0)
    thumbnail = build_model({"zoo": "resnet18_v1", "args": {"thumbnail": True}}, 10, (1, 8, 8), 0)
    shapes = [list(n.collect_params().values())[0].shape for n in (stem, thumbnail)]
    assert shapes == [(64, 1, 7, 7), (64, 1, 3, 3)]  # the thumbnail's 3x3 first convolution
    net = build_model({"zoo": "mobilenet0.25", "args": {"classes": 10}}, 10, (1, 8, 8), 0)
    assert net(mx.nd.zeros((1, 1, 8, 8))).shape == (1, 10)


@pytest.mark.parametrize("kind", ["zoo", "factory"])
def test_two_builds_give_bit_identical_parameters_and_another_seed_others(kind, factories):
    module, folder = factories
    spec = (
        {"zoo": "mobilenet0.25"}
        if kind == "zoo"
        else {"factory": f"{module}:small", "args": {"width": 8}}
    )
    first = build_model(spec, 10, (1, 8, 8), seed=7, python_path=[folder])
    mx.random.seed(123)  # disturb the global generator between builds
    mx.nd.random.uniform(shape=(100,)).wait_to_read()
    build_model("resnet", 10, (1, 8, 8), seed=1)  # and Gluon's name counters
    second = build_model(spec, 10, (1, 8, 8), seed=7, python_path=[folder])
    assert_same_parameters(first, second)
    other = build_model(spec, 10, (1, 8, 8), seed=8, python_path=[folder])
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(parameter_arrays(first), parameter_arrays(other), strict=True)
    )


def test_factory_receives_classes_input_shape_and_args(factories):
    module, folder = factories
    net = build_model(
        {"factory": f"{module}:small", "args": {"width": 5}}, 7, (1, 6, 6), 0, [folder]
    )
    assert net(mx.nd.zeros((3, 1, 6, 6))).shape == (3, 7)
    shapes = [p.shape for p in net.collect_params().values()]
    assert (5, 4 * 6 * 6) in shapes and (7, 5) in shapes
    assert sys.path[0] == folder


def test_a_plain_block_from_a_factory_is_accepted(factories):
    module, folder = factories
    net = build_model({"factory": f"{module}:plain_block"}, 3, (1, 4, 4), 0, [folder])
    assert net(mx.nd.zeros((2, 1, 4, 4))).shape == (2, 3)


def test_gradients_reach_every_parameter_of_a_zoo_network():
    net = build_model({"zoo": "mobilenet0.25"}, 10, (1, 8, 8), seed=0)
    with mx.autograd.record():
        loss = net(mx.nd.ones((4, 1, 8, 8))).sum()
    loss.backward()
    grads = [p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]
    assert grads and all(np.isfinite(g).all() for g in grads)
    assert any(np.abs(g).sum() > 0 for g in grads)


def test_zoo_names_are_those_get_model_knows():
    names = zoo_names()
    assert "resnet18_v1" in names and "mobilenet0.25" in names and len(names) > 20


def bad(factory_module):
    """Each bad spec and what its one-line message must say."""
    m = factory_module
    return {
        "unknown zoo name": (
            {"zoo": "resnet18"},
            ["model.zoo", "'resnet18'", "resnet18_v1", "resnet18_v2"],
        ),
        "zoo name far from any": ({"zoo": "qqqqqqqq"}, ["model.zoo", "alexnet", "vgg11"]),
        "pretrained": (
            {"zoo": "resnet18_v1", "args": {"pretrained": True}},
            ["model.args.pretrained", "download"],
        ),
        "zoo args rejected": (
            {"zoo": "mobilenet0.25", "args": {"depth": 3}},
            ["model.args", "depth"],
        ),
        "module does not import": (
            {"factory": "broken_import:make"},
            ["model.factory", "'broken_import'", "ModuleNotFoundError", "no_such_module_anywhere"],
        ),
        "module with a syntax error": (
            {"factory": "bad_syntax:f"},
            ["model.factory", "'bad_syntax'", "SyntaxError"],
        ),
        "no such module": ({"factory": "nowhere_at_all:f"}, ["model.factory", "nowhere_at_all"]),
        "missing function": ({"factory": f"{m}:nothing"}, ["model.factory", "'nothing'"]),
        "not callable": ({"factory": f"{m}:NOT_CALLABLE"}, ["model.factory", "NOT_CALLABLE"]),
        "not a block": ({"factory": f"{m}:not_a_block"}, ["model.factory", "str", "Block"]),
        "factory args rejected": (
            {"factory": f"{m}:small", "args": {"depth": 3}},
            ["model.args", "depth"],
        ),
        "factory args fail": (
            {"factory": f"{m}:small", "args": {"width": -2}},
            ["model", f"{m}:small", "one sample"],
        ),
        "factory raises": ({"factory": f"{m}:broken"}, ["model.factory", "no network today"]),
        "wrong columns": (
            {"factory": f"{m}:too_many_columns"},
            ["model", "(1, 11)", "(1, 10)", "classes"],
        ),
        "two outputs": ({"factory": f"{m}:two_outputs"}, ["model", "gives list", "(1, 10)"]),
        "zoo net too deep for the input": (
            {"zoo": "squeezenet1.1"},
            ["model", "squeezenet1.1", "(1, 1, 8, 8)"],
        ),
        "bad form": ({"zoo": "resnet18_v1", "factory": "a:b"}, ["model", "exactly one"]),
    }


CASES = sorted(bad("m"))


@pytest.mark.parametrize("case", CASES)
def test_bad_spec_is_one_line_naming_the_key(case, factories, capsys):
    module, folder = factories
    spec, fragments = bad(module)[case]
    with pytest.raises(DynallocError) as caught:
        build_model(spec, 10, (1, 8, 8), 0, [folder])
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert capsys.readouterr().out == ""  # MXNet's shape-inference chatter is kept out


def test_a_factory_module_is_found_only_on_the_python_path(factories):
    module, folder = factories
    with pytest.raises(DynallocError, match=f"module '{module}' does not import"):
        build_model({"factory": f"{module}:small"}, 10, (1, 8, 8), 0)
    build_model({"factory": f"{module}:small"}, 10, (1, 8, 8), 0, [folder])
