"""The run config of `dynalloc train`: defaults, validation, and the resolved form written back.

Every problem is reported as one DynallocError naming the key, before anything is created, so a
bad config never leaves a half-made run directory behind.
"""

import copy
import math
from pathlib import Path

import yaml

from dynalloc.core.policies import POLICIES, make_policy
from dynalloc.core.scenario import Scenario
from dynalloc.core.shares import check_bounds
from dynalloc.errors import DynallocError
from dynalloc.experiment.elastic_spec import ELASTIC_DEFAULTS, check_elastic
from dynalloc.experiment.model_spec import check_model
from dynalloc.experiment.script_spec import SCRIPT_BUILDS, check_script
from dynalloc.experiment.stream_config import STREAM_DEFAULTS, check_stream
from dynalloc.experiment.warm_spec import check_warm_start

# Scenario's parameters
SCENARIO_KEYS = ("slowdown", "read_slowdown", "changes", "jitter", "jitter_draw")

DEFAULTS = {
    "dataset": None,  # a staged dataset directory (`dynalloc stage`)
    "framework": "mxnet",  # or "torch": the PyTorch adapter (`dynalloc.runtime.torch`)
    "model": "lenet",
    "global_batch": 512,
    "epochs": 1,
    "iterations": None,  # when set, run this many iterations and ignore `epochs`
    "drop_last": False,
    "optimizer": {"name": "sgd", "lr": 0.01, "momentum": 0.9, "wd": 0.0001},
    "policy": {"name": "adaptive"},
    "min_share": 1,
    "max_share": None,
    "scenario": {"slowdown": None, "changes": []},
    "seed": 0,
    "target_accuracy": None,
    "pin_cores": True,  # pin rank r to core r mod cores (then contention has a core to hit)
    "threads_per_rank": 1,  # OpenMP and MXNet engine threads of each rank
    "checkpoint": {"every": None, "keep": 2},  # every N iterations (and every epoch end); keep K
    "stall_timeout": 60,  # seconds without progress that end the job (common.stall); null: off
    "labels": {},  # free-form names (dataset, scenario, run) that analysis reports carry along
    "python_path": [],  # directories searched first for a `model: {factory: ...}` module
    "script": None,  # the user's own training script (its Recorder), instead of `model`
    "script_args": [],  # its command-line arguments
    "stream": STREAM_DEFAULTS,  # how the ranks read a streamed dataset (`stream_config`)
    "elastic": ELASTIC_DEFAULTS,  # restarts on the ranks that remain after a loss (elastic_spec)
}


def load_config(path):
    """The YAML mapping in `path`, or DynallocError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except OSError as error:
        raise DynallocError(f"cannot read config {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise DynallocError(f"config {path} is not UTF-8 text") from None
    except yaml.YAMLError as error:
        first_line = str(error).splitlines()[0]
        raise DynallocError(f"config {path} is not valid YAML: {first_line}") from None
    if not isinstance(raw, dict):
        raise DynallocError(f"config {path} must be a mapping of keys to values")
    return raw


def resolve(raw, ranks):
    """Defaults filled in and every key checked for a run of `ranks` ranks."""
    raw = {k: v for k, v in raw.items() if k != "ranks"}  # a resolved config.yaml reruns as is
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise DynallocError(f"unknown config key {unknown[0]!r}; known keys: {', '.join(DEFAULTS)}")
    config = copy.deepcopy(DEFAULTS)
    config.update(copy.deepcopy(raw))
    config["ranks"] = ranks
    if config["script"] is not None:  # it builds its own: config.yaml records what it was given
        config.update({key: raw.get(key) for key in SCRIPT_BUILDS})

    if not config["dataset"] or not isinstance(config["dataset"], str):
        raise DynallocError(
            "config key 'dataset' is required: the path of a directory made by "
            f"dynalloc stage, got {config['dataset']!r}"
        )
    config["dataset"] = str(Path(config["dataset"]).expanduser().resolve())
    check_framework(config["framework"])
    if config["model"] is not None or config["script"] is None:
        check_model(config["model"])
    if config["framework"] == "torch" and "zoo" in (config["model"] or ()):
        raise DynallocError(
            "config key 'model.zoo' names a network of MXNet's model zoo; a framework: "
            "torch run takes {factory: 'package.module:function'} returning a torch.nn.Module"
        )
    _python_path(config)
    for key in ("global_batch", "epochs", "seed", "threads_per_rank"):
        _integer(config, key, minimum=0 if key == "seed" else 1)
    if config["iterations"] is not None:
        _integer(config, "iterations", minimum=1)
    _share_bound(config, "min_share", ranks, optional=False)
    _share_bound(config, "max_share", ranks, optional=True)
    for key in ("drop_last", "pin_cores"):
        if not isinstance(config[key], bool):
            raise DynallocError(f"config key {key!r} must be true or false, got {config[key]!r}")
    target = config["target_accuracy"]
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target <= 1
    ):
        raise DynallocError(f"config key 'target_accuracy' must be in (0, 1], got {target!r}")

    try:
        check_bounds(ranks, config["global_batch"], config["min_share"], config["max_share"])
    except ValueError as error:
        raise DynallocError(f"global_batch: {error}") from None

    scenario = _mapping(config, "scenario")
    unknown = sorted(set(scenario) - set(SCENARIO_KEYS))
    if unknown:
        raise DynallocError(
            f"unknown key 'scenario.{unknown[0]}'; known: {', '.join(SCENARIO_KEYS)}"
        )
    try:
        built = Scenario(ranks, **scenario)
    except ValueError as error:
        raise DynallocError(str(error)) from None

    if any(c.mode == "contention" for c in built.changes) and not config["pin_cores"]:
        raise DynallocError(
            "scenario.changes with mode contention need pin_cores: true "
            "(the burners share the rank's pinned core)"
        )

    check_policy(config, built)
    if config["optimizer"] is not None or config["script"] is None:
        _mapping(config, "optimizer")
    _checkpoint(config)
    _stall_timeout(config)
    check_script(config)
    config["stream"] = check_stream(config["stream"])
    config["elastic"] = check_elastic(config["elastic"], ranks)
    labels = _mapping(config, "labels")
    if not all(isinstance(k, str) and isinstance(v, str | int) for k, v in labels.items()):
        raise DynallocError(f"config key 'labels' must map names to strings, got {labels!r}")
    return config


FRAMEWORKS = ("mxnet", "torch")


def _as_dict(value):
    return value if isinstance(value, dict) else {}


def check_framework(value):
    """The run's framework: its DynamicBatch, network, optimizer and interpreter follow it."""
    if value not in FRAMEWORKS:
        raise DynallocError(
            f"config key 'framework' must be one of {', '.join(FRAMEWORKS)}, got {value!r}"
        )


def check_policy(config, scenario):
    """Make the run's policy once, so that a bad parameter is named before anything runs (the
    pipeline calls it for every run when it builds the DAG); an `oracle` without speeds gets the
    `scenario`'s (a core.scenario.Scenario)."""
    policy = _mapping(config, "policy")
    name = policy.get("name")
    if name not in POLICIES:
        raise DynallocError(
            f"unknown policy {name!r} (policy.name); choose one of {', '.join(POLICIES)}"
        )
    if name == "oracle" and "speeds" not in policy:
        if scenario.changes:
            raise DynallocError("policy 'oracle' needs policy.speeds when scenario.changes is set")
        policy["speeds"] = scenario.static_speeds()
    ranks = scenario.ranks
    warm = check_warm_start(policy.pop("warm_start", None), name, ranks)
    try:
        make_policy(policy, ranks, config["global_batch"], config["min_share"], config["max_share"])
    except ValueError as error:
        raise DynallocError(f"policy: {error}") from None
    if warm is not None:
        policy["warm_start"] = warm


def total_iterations(config, batches_per_epoch):
    """Iterations the run will make: `iterations` when set (epochs then follow from it),
    otherwise all batches of `epochs` epochs."""
    if config["iterations"] is not None:
        return config["iterations"]
    return config["epochs"] * batches_per_epoch


def planned_epochs(config, batches_per_epoch):
    return math.ceil(total_iterations(config, batches_per_epoch) / batches_per_epoch)


def _checkpoint(config):
    settings = _mapping(config, "checkpoint")
    unknown = sorted(set(settings) - {"every", "keep"})
    if unknown:
        raise DynallocError(f"unknown key 'checkpoint.{unknown[0]}'; known: every, keep")
    config["checkpoint"] = settings = {**DEFAULTS["checkpoint"], **settings}
    for key, optional in (("every", True), ("keep", False)):
        value = settings[key]
        if (value is None and optional) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 1
        ):
            continue
        raise DynallocError(
            f"config key 'checkpoint.{key}' must be an integer >= 1"
            f"{' or null' if optional else ''}, got {value!r}"
        )


def _stall_timeout(config):
    value = config["stall_timeout"]
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf
    ):
        raise DynallocError(
            f"config key 'stall_timeout' must be a number of seconds > 0, or null to turn stall "
            f"detection off, got {value!r}"
        )


def _python_path(config):
    """Every `python_path` entry an existing directory, made absolute (ranks may start
    elsewhere)."""
    paths = config["python_path"]
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise DynallocError(
            f"config key 'python_path' must be a list of directories, got {paths!r}"
        )
    resolved = []
    for entry in paths:
        folder = Path(entry).expanduser().resolve()
        if not folder.is_dir():
            raise DynallocError(
                f"config key 'python_path' names {entry!r}, which is not a directory"
            )
        resolved.append(str(folder))
    config["python_path"] = resolved


def _integer(config, key, minimum):
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DynallocError(f"config key {key!r} must be an integer >= {minimum}, got {value!r}")


def _share_bound(config, key, ranks, optional):
    """`min_share` or `max_share` (`optional`: null allowed): an integer >= 1 for all ranks, or a
    list of one per rank. min_share >= 1: a rank without samples could not be timed, nor run a
    forward pass; a null max_share (or entry) leaves that rank uncapped."""
    value, null = config[key], " or null" if optional else ""

    def allowed(bound):
        return (bound is None and optional) or (
            isinstance(bound, int) and not isinstance(bound, bool) and bound >= 1
        )

    if not isinstance(value, list | tuple):
        if not allowed(value):
            raise DynallocError(
                f"config key {key!r} must be an integer >= 1{null} or a list of one per rank, "
                f"got {value!r}"
            )
        return
    config[key] = value = list(value)  # written back as YAML
    if len(value) != ranks:
        raise DynallocError(
            f"config key {key!r} has {len(value)} entries for {ranks} ranks: {value!r}"
        )
    for rank, entry in enumerate(value):
        if not allowed(entry):
            raise DynallocError(
                f"config key {key!r} must be an integer >= 1{null} for every rank, got "
                f"{entry!r} for rank {rank} in {value!r}"
            )


def _mapping(config, key):
    if not isinstance(config[key], dict):
        raise DynallocError(f"config key {key!r} must be a mapping, got {config[key]!r}")
    return config[key]
