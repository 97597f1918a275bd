"""The `elastic` section of a run config, and the run config of the ranks that survive a loss.

    elastic: {min_ranks: 2, max_restarts: 3}

A lost rank or node then ends one launch of the training, not the training: the job's
supervisor (`runtime.common.elastic`) starts it again on the ranks that remain, at least
`min_ranks` of them, at most `max_restarts` times, and the run resumes from its last checkpoint.
A smaller set of ranks is only another split of the same global batch: the SGD is the same.
With `max_ranks`, new ranks join the survivors at a restart, up to it: in the slots the job
still has (a killed rank's; not those of a host cut off) under the supervisor, in the nodes its
rendezvous admits under torchrun (whose --nnodes maximum may not exceed it).
"""

from dynalloc.errors import DynallocError

ELASTIC_DEFAULTS = {"min_ranks": None, "max_ranks": None, "max_restarts": 0}
PER_RANK_SCENARIO = ("slowdown", "read_slowdown")
NEUTRAL = {"slowdown": 1.0, "read_slowdown": 1.0, "min_share": 1, "max_share": None, "speeds": 1.0}


def check_elastic(section, ranks, where="elastic"):
    """The section with its defaults, or DynallocError naming the bad key (`where` it sits: a
    run config's, or the pipeline's `training.elastic`); `ranks`: the run's."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise DynallocError(f"config key '{where}' must be a mapping, got {section!r}")
    unknown = sorted(set(section) - set(ELASTIC_DEFAULTS))
    if unknown:
        raise DynallocError(
            f"config key '{where}.{unknown[0]}' is unknown; known: {', '.join(ELASTIC_DEFAULTS)}"
        )
    elastic = {**ELASTIC_DEFAULTS, **section}
    for key in ELASTIC_DEFAULTS:
        value = elastic[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise DynallocError(f"config key '{where}.{key}' must be a whole number, got {value!r}")
    if elastic["max_restarts"] is None or elastic["max_restarts"] < 0:
        raise DynallocError(
            f"config key '{where}.max_restarts' must be 0 or more, got {elastic['max_restarts']}"
        )
    low = elastic["min_ranks"]
    if low is not None and not 1 <= low <= ranks:
        raise DynallocError(
            f"config key '{where}.min_ranks' is {low}, but the run has {ranks} ranks: it must "
            f"lie between 1 and {ranks}"
        )
    high = elastic["max_ranks"]
    if high is not None and high < max(low or 1, ranks):
        raise DynallocError(
            f"config key '{where}.max_ranks' is {high}, below the run's {ranks} ranks (or "
            "min_ranks)"
        )
    return elastic


def for_survivors(raw, survivors, costs=None):
    """The run config `raw` (of the ranks before the loss) for the ranks `survivors` (their
    numbers before it, in the new order; a number past the old ranks is a rank that joined):
    each per-rank list keeps the survivors' entries (a joining rank's neutral), a scenario
    change of a lost rank goes, and `costs` (each survivor's, the costs form of `warm_start`)
    start an adaptive policy balanced. A warm start from a run directory or cluster file of the
    old ranks goes; the probe stays, and measures the new ranks."""
    keep = list(survivors)

    def kept(values, key):
        if not isinstance(values, list):
            return values
        return [values[r] if r < len(values) else NEUTRAL[key] for r in keep]

    config = {**raw}
    scenario = {**(raw.get("scenario") or {})}
    for key in PER_RANK_SCENARIO:
        if key in scenario:
            scenario[key] = kept(scenario[key], key)
    scenario["changes"] = [
        {**change, "rank": keep.index(change["rank"])}
        for change in scenario.get("changes") or []
        if change.get("rank") in keep
    ]
    config["scenario"] = scenario
    for key in ("min_share", "max_share"):
        if key in raw:
            config[key] = kept(raw[key], key)
    policy = raw.get("policy") or {"name": "adaptive"}
    policy = {"name": policy} if isinstance(policy, str) else {**policy}
    if "speeds" in policy:
        policy["speeds"] = kept(policy["speeds"], "speeds")
    warm = policy.pop("warm_start", None)
    if costs is not None and policy.get("name") == "adaptive":
        policy["warm_start"] = costs
    elif warm == "probe":
        policy["warm_start"] = warm
    elif isinstance(warm, dict) and "intercept_s" in warm and max(keep) < len(warm["intercept_s"]):
        policy["warm_start"] = {k: kept(v, k) for k, v in warm.items()}
    config["policy"] = policy
    return config
