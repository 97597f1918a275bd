"""The network a run trains, built identically on every rank: a built-in (`runtime.mxnet.networks`),
a network of MXNet's model zoo (`{zoo: NAME, args: {...}}`), or what a user's function returns
(`{factory: "package.module:function", args: {...}}`).

Every rank builds its own replica, and synchronous data parallelism only averages gradients, so
the replicas must start from bit-identical parameters: `build_model` seeds MXNet's generator
before the network is made and again before the fixed initializer runs, names the parameters
afresh (the same names whatever was built before in the process), and materialises every
parameter with one forward pass before it returns. Everything wrong with a spec is one
DynallocError naming the key (`model`, `model.zoo`, `model.factory`, `model.args`), raised on
every rank before the run directory is touched.
"""

import contextlib
import difflib
import functools
import io
import warnings

import mxnet as mx
from mxnet.gluon import Block
from mxnet.gluon.model_zoo import vision

from dynalloc.errors import DynallocError
from dynalloc.experiment.model_spec import BUILTIN_MODELS, check_model, model_name
from dynalloc.runtime.common.factory import factory, one_line
from dynalloc.runtime.mxnet.networks import BUILDERS, MIN_SIZE

MODELS = BUILTIN_MODELS


def build_model(name, classes, input_shape, seed, python_path=()):
    """An initialised, hybridized network whose parameters depend only on `name` and `seed`.

    `name` is the run config's `model`: a built-in's name, or a `zoo` or `factory` mapping
    (`run_config.check_model`); `input_shape` is one sample's (channels, height, width);
    `python_path` lists directories put first on sys.path before a factory's module is
    imported. A forward pass on one zero sample resolves Gluon's deferred shapes (every
    parameter is allocated on return) and must give one score per class.
    """
    if isinstance(name, str) and name not in MODELS:
        raise DynallocError(
            f"model: unknown model {name!r}; choose one of {', '.join(MODELS)}, "
            "or {zoo: NAME} for a network of mxnet.gluon.model_zoo.vision"
        )
    _check_int("classes", classes, 1)
    input_shape = tuple(input_shape)
    if len(input_shape) != 3:
        raise DynallocError(f"input_shape must be (channels, height, width), got {input_shape!r}")
    for size in input_shape:
        _check_int("input_shape", size, 1)
    _check_int("seed", seed, 0)
    if isinstance(name, str):
        if min(input_shape[1:]) < MIN_SIZE[name]:
            raise DynallocError(
                f"input_shape {input_shape!r} is too small for model {name!r}: "
                f"height and width must be >= {MIN_SIZE[name]}"
            )
        make = functools.partial(BUILDERS[name], classes)
    else:
        check_model(name)
        args = dict(name.get("args") or {})
        if "zoo" in name:
            make = _zoo(name["zoo"], classes, args)
        else:
            make = factory(
                name["factory"], classes, input_shape, args, python_path, Block, "a Gluon Block"
            )

    mx.random.seed(seed)
    with mx.name.NameManager():
        net = make()
    mx.random.seed(seed)
    _initialise(net, model_name(name), classes, input_shape)
    return net


def zoo_names():
    """The names `mxnet.gluon.model_zoo.vision.get_model` knows (it lists them only in the
    error it raises for any other name)."""
    try:
        vision.get_model("")
    except ValueError as error:
        return [name.strip() for name in str(error).split("\n\t")[1:]]
    raise AssertionError("get_model accepted an empty name")


def _zoo(name, classes, args):
    names = zoo_names()
    if name.lower() not in names:
        close = difflib.get_close_matches(name.lower(), names, n=6, cutoff=0.5)
        raise DynallocError(
            f"model.zoo: {name!r} is no network of mxnet.gluon.model_zoo.vision; "
            + (f"close: {', '.join(close)}" if close else f"choose one of {', '.join(names)}")
        )
    if args.get("pretrained"):
        raise DynallocError(
            "model.args.pretrained: true would download weights; networks are trained from "
            "dynalloc's seeded initialisation (drop the key)"
        )
    args = {"classes": classes, **args}

    def make():
        try:
            return vision.get_model(name, **args)
        except Exception as error:  # noqa: BLE001 - whatever the constructor says of the args
            raise DynallocError(f"model.args: {name} rejects {args}: {one_line(error)}") from None

    return make


def _initialise(net, name, classes, input_shape):
    """Xavier initialisation, hybridized, and one forward pass on one zero sample: it allocates
    every parameter and must give an array of shape (1, classes). MXNet prints shape-inference
    failures to stdout: swallowed, the error says it."""
    shape = (1, *input_shape)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # parameters a factory initialised itself are kept
            net.initialize(
                mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), ctx=mx.cpu()
            )
        net.hybridize()
        with contextlib.redirect_stdout(io.StringIO()):
            out = net(mx.nd.zeros(shape, ctx=mx.cpu()))
            if isinstance(out, mx.nd.NDArray):
                out.wait_to_read()
    except Exception as error:  # noqa: BLE001 - whatever the network raises
        raise DynallocError(
            f"model: {name} fails to initialise and run on one sample of shape {shape}: "
            f"{one_line(error)}"
        ) from None
    got = out.shape if isinstance(out, mx.nd.NDArray) else type(out).__name__
    if got != (1, classes):
        raise DynallocError(
            f"model: {name} gives {got} on one sample of shape {shape}, not (1, {classes}): "
            f"one score for each of the dataset's {classes} classes"
        )


def _check_int(key, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DynallocError(f"{key} must be an integer >= {minimum}, got {value!r}")
