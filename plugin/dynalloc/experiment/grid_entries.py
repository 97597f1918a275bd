"""The pipeline config's entries of one grid point, made run-config keys: its policy (and a
warm start that names another policy's run of the same point), its scenario."""

from pathlib import Path

from dynalloc.core.policies import POLICIES
from dynalloc.core.scenario import Scenario
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import DEFAULTS, check_policy
from dynalloc.experiment.warm_spec import PROBE

BASELINES = {"dist_sync": "baseline"}  # policy kind -> the dynalloc subcommand that trains it


def run_name(dataset, model, policy, scenario, ranks, seed):
    return f"{dataset}-{model}-{policy}-{scenario}-r{ranks}-s{seed}"


def policy_config(name, spec):
    """(dynalloc subcommand, run-config policy) of a `policies` entry: its parameters, and
    `kind` when the entry is a variant of a policy. The kind `dist_sync` is no allocation
    policy but MXNet's parameter server (`dynalloc baseline`), which splits equally."""
    params = dict(spec or {})
    kind = params.pop("kind", name)
    if kind in BASELINES:
        if params:
            raise DynallocError(f"policies.{name}: {kind} takes no parameters, got {params}")
        return BASELINES[kind], {"name": "static"}
    if kind not in POLICIES:
        raise DynallocError(
            f"policies.{name}: unknown policy {kind!r}; choose one of "
            f"{', '.join([*POLICIES, *BASELINES])} (or set kind:)"
        )
    return "train", {"name": kind, **params}


def check_run_policy(name, policy, scenario, ranks, training):
    """Make a run's policy now, so that a bad parameter stops the pipeline when it builds the
    DAG, not once other runs have trained."""
    config = {**DEFAULTS, **training, "policy": dict(policy)}
    try:
        check_policy(config, Scenario(ranks, **scenario))
    except (DynallocError, ValueError) as error:
        raise DynallocError(f"policies.{name}: {error}") from None


def scenario_config(name, spec, ranks):
    """Per-rank factors from the `{rank: factor}` form, checked against this run's ranks."""
    spec = dict(spec or {})
    factors = _per_rank(name, "slowdown", spec.get("slowdown") or {}, ranks)
    changes = spec.get("changes") or []
    for i, change in enumerate(changes):
        if not 0 <= int(change.get("rank", -1)) < ranks:
            raise DynallocError(
                f"scenarios.{name}.changes[{i}].rank {change.get('rank')!r} "
                f"names no rank of a {ranks}-rank run"
            )
    jitter = {key: spec[key] for key in ("jitter", "jitter_draw") if key in spec}
    reads = {}
    if spec.get("read_slowdown"):
        reads["read_slowdown"] = _per_rank(name, "read_slowdown", spec["read_slowdown"], ranks)
    return {"slowdown": factors, "changes": changes, **jitter, **reads}


def _per_rank(name, key, factors, ranks):
    """[factor of rank 0, ...] from `{rank: factor}`, ranks not named at 1."""
    listed = [1.0] * ranks
    for rank, factor in factors.items():
        if not 0 <= int(rank) < ranks:
            raise DynallocError(
                f"scenarios.{name}.{key} names rank {rank}, but a run of this "
                f"grid has only {ranks} ranks (0..{ranks - 1})"
            )
        listed[int(rank)] = float(factor)
    return listed


def warm_start_of(name, policy, point, results):
    """(policy, the run it warm-starts from or None): `warm_start: {policy: P}` is the run of
    the same grid point with policy P (the train rule then waits for it), made its directory; a
    run directory given by path must exist when the DAG is built."""
    warm = policy.get("warm_start")
    if isinstance(warm, dict) and set(warm) == {"policy"}:
        dataset, model, _, scenario, ranks, seed = point
        source = run_name(dataset, model, warm["policy"], scenario, ranks, seed)
        return {**policy, "warm_start": str(Path(results) / "runs" / source / "train")}, source
    if isinstance(warm, str) and warm != PROBE and not Path(warm).expanduser().exists():
        raise DynallocError(f"policies.{name}.warm_start: {warm} does not exist")
    return policy, None
