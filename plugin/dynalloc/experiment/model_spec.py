"""A run's network as its config names it: a built-in's name, a network of MXNet's model zoo, or
a user's factory function. Checked here in form only (no MXNet in this environment); the names
themselves are checked when the network is built (`dynalloc.runtime.mxnet.models`)."""

import re
from pathlib import Path

from dynalloc.errors import DynallocError

BUILTIN_MODELS = ("mlp", "lenet", "resnet")  # dynalloc.runtime.mxnet.networks
MODEL_KINDS = ("zoo", "factory")  # {zoo: NAME, args: {...}}, {factory: "module:function", ...}
_FACTORY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def check_model(spec, key="model"):
    """The form of a model spec: a built-in's name, `{zoo: NAME, args: {...}}` or `{factory:
    "package.module:function", args: {...}}`. The names themselves are checked when the
    network is built (`dynalloc.runtime.mxnet.models`)."""
    if isinstance(spec, str) and spec:
        return
    if not isinstance(spec, dict):
        raise DynallocError(
            f"config key {key!r} must be a built-in model ({', '.join(BUILTIN_MODELS)}), "
            f"{{zoo: NAME, args: {{...}}}} or {{factory: 'package.module:function', "
            f"args: {{...}}}}, got {spec!r}"
        )
    unknown = sorted(map(str, set(spec) - {*MODEL_KINDS, "args"}))
    if unknown:
        raise DynallocError(f"unknown key '{key}.{unknown[0]}'; known: zoo, factory, args")
    kinds = [kind for kind in MODEL_KINDS if kind in spec]
    if len(kinds) != 1:
        raise DynallocError(
            f"config key {key!r} needs exactly one of zoo and factory, got {spec!r}"
        )
    value = spec[kinds[0]]
    if kinds == ["zoo"] and not (isinstance(value, str) and value):
        raise DynallocError(
            f"config key '{key}.zoo' must name a network of mxnet.gluon.model_zoo.vision "
            f"(e.g. resnet18_v1), got {value!r}"
        )
    if kinds == ["factory"] and not (isinstance(value, str) and _FACTORY.fullmatch(value)):
        raise DynallocError(
            f"config key '{key}.factory' must look like 'package.module:function', got {value!r}"
        )
    args = spec.get("args")
    if args is not None and not (isinstance(args, dict) and all(isinstance(k, str) for k in args)):
        raise DynallocError(
            f"config key '{key}.args' must map argument names to values, got {args!r}"
        )


def model_name(spec):
    """A model spec's name for labels: a built-in's name, the zoo network's, or
    "module:function" of a factory."""
    if isinstance(spec, str):
        return spec
    return spec["zoo"] if "zoo" in spec else spec["factory"]


def model_label(config):
    """The model's name in a run's metrics: `labels.model` (the pipeline's `models` entry) when
    set, else the script's file name for a run of its own script, else `model_name`."""
    if config["labels"].get("model"):
        return str(config["labels"]["model"])
    return Path(config["script"]).stem if config["script"] else model_name(config["model"])
