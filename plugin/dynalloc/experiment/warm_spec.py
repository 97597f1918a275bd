"""The form of a run config's `policy.warm_start`, checked without reading anything
(`experiment.warm_start` resolves it into costs):

    warm_start: RUN_DIR              # a previous run's costs, fitted as `simulate --fit` fits them
    warm_start: {cluster: FILE}      # a cluster file's ranks (`dynalloc simulate`'s)
    warm_start: probe                # each rank timed at two shares before the first iteration
    warm_start: {intercept_s: [...], per_sample_s: [...]}   # the costs themselves, per rank

The costs form may also hold `noise` (the ranks' relative spread) and `source` (where the costs
came from, which a run's config.yaml records beside them)."""

import math
from pathlib import Path

from dynalloc.errors import DynallocError

PROBE = "probe"
COSTS = ("intercept_s", "per_sample_s")
WARM_POLICIES = ("adaptive",)  # the policies that model costs


def check_warm_start(value, policy, ranks=None):
    """`value` in its normal form (a path made a string), or DynallocError naming what is wrong;
    `policy`: the policy's name (only one that models costs can start warm)."""
    if value is None:
        return None
    if policy not in WARM_POLICIES:
        raise DynallocError(
            f"policy.warm_start: policy {policy!r} models no costs to start from; a warm start "
            f"is for {', '.join(WARM_POLICIES)}"
        )
    if value == PROBE:
        return PROBE
    if isinstance(value, str | Path):
        return str(value)
    if isinstance(value, dict) and set(value) == {"cluster"}:
        return {"cluster": str(value["cluster"])}
    if isinstance(value, dict) and set(COSTS) <= set(value) <= {*COSTS, "noise", "source"}:
        return costs_form(value, ranks)
    raise DynallocError(
        "policy.warm_start must be a run directory, probe, {cluster: FILE} or "
        f"{{intercept_s: [...], per_sample_s: [...]}}, got {value!r}"
    )


def costs_form(value, ranks):
    """The costs form, checked: one intercept >= 0 and one per-sample cost > 0 per rank."""
    a, c = (value[key] for key in COSTS)
    if not (isinstance(a, list) and isinstance(c, list) and len(a) == len(c)):
        raise DynallocError("policy.warm_start: intercept_s and per_sample_s must be lists of "
                            "one number per rank")  # fmt: skip
    if ranks is not None and len(a) != ranks:
        raise DynallocError(f"policy.warm_start holds costs of {len(a)} ranks, the run has {ranks}")
    good = all(_finite(x) and x >= 0 for x in a) and all(_finite(x) and x > 0 for x in c)
    noise = value.get("noise")
    if not good or (noise is not None and not (_finite(noise) and noise >= 0)):
        raise DynallocError("policy.warm_start: intercepts must be >= 0, per-sample costs and "
                            f"noise > 0, got {value!r}")  # fmt: skip
    extra = {"noise": float(noise)} if noise is not None else {}
    if "source" in value:
        extra["source"] = str(value["source"])
    return {"intercept_s": [float(x) for x in a], "per_sample_s": [float(x) for x in c], **extra}


def _finite(x):
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
