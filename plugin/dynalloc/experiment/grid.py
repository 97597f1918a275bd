"""The pipeline's experiment grid: dataset x model x policy x scenario x ranks x seed -> runs.

The Snakefile calls `expand_runs` once at parse time, so every mistake in the grid is reported
before any job starts, and each run gets a readable, stable name and the exact run config that
`dynalloc train` will read (written by the `run_config` rule).
"""

import itertools
from pathlib import Path

from dynalloc.errors import DynallocError
from dynalloc.experiment.elastic_spec import check_elastic
from dynalloc.experiment.grid_entries import (
    check_run_policy,
    policy_config,
    run_name,
    scenario_config,
    warm_start_of,
)
from dynalloc.experiment.model_spec import BUILTIN_MODELS, check_model

AXES = ("dataset", "model", "policy", "scenario", "ranks", "seed")
COMPARED_BY = tuple(axis for axis in AXES if axis != "policy")  # runs compared with each other
STAGE_OPTIONS = ("path", "val_path", "seed", "test_fraction", "samples", "shape", "classes")
STAGE_FLAGS = ("in_memory",)  # true adds the option, without a value


def expand_runs(config, config_dirs=()):
    """{run name: {"ranks": R, "dataset": name, "command": dynalloc subcommand, "config": run
    config, "axes": {axis: value}, "priority": n}} for every point of the grid (or of each grid,
    when `grid` is a list: the union, for experiments that are not one full product);
    DynallocError names the bad key. See `compared_together` for the priorities.
    `config_dirs` (the pipeline's config files' directories) follow `python_path` in the
    `python_path` of every run of a `models` factory, where its module is looked for (only
    there: another config file must not rerun the runs that import nothing)."""
    grids = config["grid"] if isinstance(config["grid"], list) else [config["grid"]]
    check_dataset_files(config["datasets"])
    models = model_table(config)
    python_path = run_python_path(config, config_dirs)
    runs = {}
    for i, grid in enumerate(grids):
        where = f"grid[{i}]" if isinstance(config["grid"], list) else "grid"
        for name, run in _expand(config, grid, where, models, python_path).items():
            if name in runs and runs[name] != run:
                raise DynallocError(
                    f"two points of the grid are both named {name!r}: rename a "
                    "dataset, policy or scenario so that names stay unique"
                )
            runs[name] = run
    for run in runs.values():
        source = run.get("warm_from")
        if source is not None and source not in runs:
            raise DynallocError(
                f"policies.{run['axes']['policy']}.warm_start: the grid does not train {source}, "
                "the run it names"
            )
    return compared_together(runs)


def check_dataset_files(datasets):
    """Every file a `datasets` entry names exists, so that a typo in a path stops the pipeline
    when its DAG is built, not in a staging job after other jobs ran."""
    for name, spec in datasets.items():
        for key in ("path", "val_path"):
            if key in spec and not Path(str(spec[key])).expanduser().exists():
                raise DynallocError(
                    f"datasets.{name}.{key}: {spec[key]} does not exist (relative paths start "
                    f"where snakemake runs, {Path.cwd()})"
                )


def compared_together(runs):
    """Give the runs that are compared with each other (equal in COMPARED_BY; every policy)
    consecutive scheduling priorities, in the grid's order: on a machine
    whose speed drifts over the hour a benchmark takes, runs that follow each other compare
    with the least drift between them. The train rule's `priority` reads them."""

    def group(name):
        return tuple(runs[name]["axes"][axis] for axis in COMPARED_BY)

    first = {}
    for name in runs:
        first.setdefault(group(name), len(first))
    ordered = sorted(runs, key=lambda name: first[group(name)])  # stable: grid order within
    return {
        name: {**runs[name], "priority": len(ordered) - position}
        for position, name in enumerate(ordered)
    }


def model_table(config):
    """The `models` entries ({name: zoo or factory spec, or a training script}), each checked
    in form; a script's path made absolute (relative to where snakemake runs) and checked."""
    models = config.get("models") or {}
    if not isinstance(models, dict):
        raise DynallocError(f"models must map names to model specs, got {models!r}")
    checked = {}
    for name, spec in models.items():
        if name in BUILTIN_MODELS:
            raise DynallocError(f"models.{name}: {name!r} is a built-in model's name; rename it")
        if not isinstance(spec, dict):
            raise DynallocError(
                f"models.{name} must be {{zoo: NAME, args: {{...}}}}, "
                f"{{factory: 'package.module:function', args: {{...}}}} or "
                f"{{script: PATH, script_args: [...]}}, got {spec!r}"
            )
        checked[name] = _script_entry(name, spec) if "script" in spec else spec
        if "script" not in spec:
            check_model(spec, f"models.{name}")
    return checked


def _script_entry(name, spec):
    """A `models` entry that is the user's own training script: the run-config keys it sets."""
    unknown = sorted(set(spec) - {"script", "script_args"})
    if unknown:
        raise DynallocError(f"models.{name}: unknown key {unknown[0]!r} beside script")
    script = Path(str(spec["script"])).expanduser().resolve()
    if not script.is_file():
        raise DynallocError(f"models.{name}.script: {spec['script']} is not a file")
    arguments = spec.get("script_args") or []
    if not isinstance(arguments, list):
        raise DynallocError(f"models.{name}.script_args must be a list, got {arguments!r}")
    return {"script": str(script), "script_args": [str(a) for a in arguments]}


def run_python_path(config, config_dirs):
    """`python_path` (top level, then `training`'s), then the config files' directories, each
    once."""
    paths = []
    for where, value in (
        ("python_path", config.get("python_path")),
        ("training.python_path", config["training"].get("python_path")),
    ):
        if value is not None and not (
            isinstance(value, list) and all(isinstance(p, str) for p in value)
        ):
            raise DynallocError(f"{where} must be a list of directories, got {value!r}")
        paths += value or []
    return list(dict.fromkeys([*paths, *map(str, config_dirs)]))


def _expand(config, grid, where, models, python_path):
    for axis in AXES:
        if not grid.get(axis):
            raise DynallocError(f"{where}.{axis} is empty: the grid expands to no run")
    for axis, table in (("dataset", "datasets"), ("scenario", "scenarios"), ("policy", "policies")):
        for name in grid[axis]:
            if name not in config[table]:
                raise DynallocError(
                    f"{where}.{axis} names {name!r}, which {table} does not define "
                    f"(defined: {', '.join(config[table]) or 'none'})"
                )
    results = Path(config["results"])
    runs = {}
    for point in itertools.product(*(grid[axis] for axis in AXES)):
        dataset, model, policy, scenario, ranks, seed = point
        name = run_name(dataset, model, policy, scenario, ranks, seed)
        if name in runs:
            raise DynallocError(
                f"two points of the grid are both named {name!r}: rename a "
                "dataset, policy or scenario so that names stay unique"
            )
        for key in ("min_share", "max_share"):  # one per rank: only for runs of that many
            bound = config["training"].get(key)
            if isinstance(bound, list) and len(bound) != ranks:
                raise DynallocError(
                    f"training.{key} has {len(bound)} entries (one per rank), but run {name} "
                    f"has {ranks} ranks"
                )
        check_elastic(config["training"].get("elastic"), ranks, where="training.elastic")
        command, policy_spec = policy_config(policy, config["policies"][policy])
        if command != "train" and config["training"].get("framework") == "torch":
            raise DynallocError(
                f"{where}: policy {policy!r} is MXNet's own dist_sync, which a framework: "
                "torch run cannot use (plain DDP is `static` there)"
            )
        scenario_spec = scenario_config(scenario, config["scenarios"][scenario], ranks)
        policy_spec, warm_from = warm_start_of(policy, policy_spec, point, results)
        if command == "train":
            check_run_policy(policy, policy_spec, scenario_spec, ranks, config["training"])
        labels = {"run": name, "dataset": dataset, "scenario": scenario, "policy": policy}
        run_config = {
            **config["training"],
            "dataset": str(results / "data" / dataset),
            "model": models.get(model, model),
            "policy": policy_spec,
            "scenario": scenario_spec,
            "seed": seed,
            "labels": {**labels, "model": model} if model in models else labels,
        }
        spec = run_config["model"]
        run_config.pop("python_path", None)  # `training`'s: only a factory imports anything
        if python_path and isinstance(spec, dict) and "factory" in spec:
            run_config["python_path"] = python_path
        if isinstance(spec, dict) and "script" in spec:  # the user's own script trains instead
            if command != "train":
                raise DynallocError(
                    f"{where}: model {model!r} is a training script, which {policy!r} "
                    "(MXNet's own dist_sync) cannot run"
                )
            run_config.update(run_config.pop("model"))
        runs[name] = {
            "ranks": ranks,
            "dataset": dataset,
            "command": command,
            "config": run_config,
            "axes": dict(zip(AXES, point, strict=True)),
            **({"warm_from": warm_from} if warm_from else {}),
        }
    for model in grid["model"]:  # after the names: a collision is the clearer message
        if model not in BUILTIN_MODELS and model not in models:
            raise DynallocError(
                f"{where}.model names {model!r}, which is neither a built-in model "
                f"({', '.join(BUILTIN_MODELS)}) nor defined in models "
                f"(defined: {', '.join(models) or 'none'})"
            )
    return runs


def stage_arguments(spec):
    """Command-line options of `dynalloc stage` for one `datasets` entry."""
    arguments = ["--source", spec["source"]]
    for option in STAGE_OPTIONS:
        if option in spec:
            value = spec[option]
            value = ",".join(map(str, value)) if isinstance(value, list) else value
            arguments += [f"--{option.replace('_', '-')}", str(value)]
    arguments += [f"--{flag.replace('_', '-')}" for flag in STAGE_FLAGS if spec.get(flag)]
    return arguments
