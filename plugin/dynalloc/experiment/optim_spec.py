"""The run config's `optimizer` block, checked key by key and read into plain numbers, and its
learning-rate schedules as formulas: what every framework's optimizer is built from.

A typo fails at start-up with the key's path rather than as a silent default or an assertion
deep inside a framework. Schedules count optimizer updates, one per iteration, so `every`,
`warmup` and `total_iterations` are all in iterations; `learning_rate` gives the rate of the
n-th update as MXNet's FactorScheduler and CosineScheduler give it, so that a PyTorch run
(`LambdaLR` over it) follows the MXNet run's schedule.
"""

import math
from dataclasses import dataclass

from dynalloc.errors import DynallocError

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("none", "step", "cosine")

_PATH = "optimizer"
_KEYS = {
    "sgd": ("name", "lr", "momentum", "wd", "schedule"),
    "adam": ("name", "lr", "wd", "schedule"),
}
_SCHEDULE_KEYS = {
    "none": ("name",),
    "step": ("name", "every", "factor"),
    "cosine": ("name", "final_lr", "warmup"),
}
_REQUIRED = object()


def _mapping(value, path):
    if not isinstance(value, dict):
        raise DynallocError(f"{path} must be a mapping, got {value!r}")
    return value


def _choice(spec, path, choices):
    """The block's `name`, which decides which other keys the block may have."""
    value = spec.get("name", _REQUIRED)
    if value is _REQUIRED:
        raise DynallocError(f"{path}.name is required; choose one of {', '.join(choices)}")
    if value not in choices:
        raise DynallocError(f"{path}.name must be one of {', '.join(choices)}, got {value!r}")
    return value


def _check_keys(spec, path, allowed, what):
    for key, value in spec.items():
        if key not in allowed:
            raise DynallocError(
                f"{path}.{key} is not a valid key for {what} (got {value!r}); "
                f"allowed keys: {', '.join(allowed)}"
            )


def _value(spec, path, key, default):
    if key in spec:
        return spec[key]
    if default is _REQUIRED:
        raise DynallocError(f"{path}.{key} is required")
    return default


def _real(spec, path, key, accept, allowed, default=_REQUIRED):
    """A finite number satisfying `accept`; `allowed` describes the range for the message."""
    value = _value(spec, path, key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not accept(value)
    ):
        raise DynallocError(f"{path}.{key} must be a number {allowed}, got {value!r}")
    return float(value)


def _integer(spec, path, key, minimum, default=_REQUIRED):
    value = _value(spec, path, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DynallocError(f"{path}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer block, checked: `schedule` is (name, {its parameters})."""

    name: str
    lr: float
    wd: float
    momentum: float | None  # sgd only
    schedule: tuple
    total_iterations: int


def check_optimizer(spec, total_iterations):
    """The OptimizerSpec of the run config's `optimizer` mapping for a run of
    `total_iterations`, or DynallocError naming the key."""
    if (
        isinstance(total_iterations, bool)
        or not isinstance(total_iterations, int)
        or total_iterations < 1
    ):
        raise DynallocError(f"total_iterations must be an integer >= 1, got {total_iterations!r}")
    spec = _mapping(spec, _PATH)
    name = _choice(spec, _PATH, OPTIMIZERS)
    _check_keys(spec, _PATH, _KEYS[name], f"optimizer {name!r}")
    lr = _real(spec, _PATH, "lr", lambda v: v > 0, "> 0")
    wd = _real(spec, _PATH, "wd", lambda v: v >= 0, ">= 0", 0.0)
    momentum = None
    if name == "sgd":
        momentum = _real(spec, _PATH, "momentum", lambda v: 0 <= v < 1, "in [0, 1)", 0.9)
    schedule = _schedule(spec.get("schedule", {"name": "none"}), lr, total_iterations)
    return OptimizerSpec(name, lr, wd, momentum, schedule, total_iterations)


def _schedule(spec, lr, total_iterations):
    path = f"{_PATH}.schedule"
    spec = _mapping(spec, path)
    kind = _choice(spec, path, SCHEDULES)
    _check_keys(spec, path, _SCHEDULE_KEYS[kind], f"schedule {kind!r}")
    if kind == "step":
        every = _integer(spec, path, "every", 1)
        factor = _real(spec, path, "factor", lambda v: 0 < v <= 1, "in (0, 1]")
        return kind, {"every": every, "factor": factor}
    if kind == "cosine":
        final_lr = _real(spec, path, "final_lr", lambda v: 0 <= v <= lr, f"in [0, {lr}]", 0.0)
        warmup = _integer(spec, path, "warmup", 0, 0)
        if warmup >= total_iterations:
            raise DynallocError(
                f"{path}.warmup must be below the run's {total_iterations} iterations, "
                f"got {warmup!r}"
            )
        return kind, {"final_lr": final_lr, "warmup": warmup}
    return kind, {}


def learning_rate(spec, update):
    """The rate of the `update`-th update (from 1), as MXNet's schedulers give it."""
    kind, params = spec.schedule
    if kind == "step":  # FactorScheduler: times `factor` after every `every` updates
        return spec.lr * params["factor"] ** max(0, (update - 1) // params["every"])
    if kind == "cosine":  # CosineScheduler: linear warm-up from 0, then half a cosine
        warmup, final = params["warmup"], params["final_lr"]
        if update < warmup:
            return spec.lr * update / warmup
        if update <= spec.total_iterations:
            done = (update - warmup) / (spec.total_iterations - warmup)
            return final + (spec.lr - final) * (1 + math.cos(math.pi * done)) / 2
        return final
    return spec.lr
