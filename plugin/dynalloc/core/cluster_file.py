"""Reading a cluster file of `dynalloc simulate` into a `core.cluster.Cluster`: every key checked,
every problem a ValueError naming the key (config/clusters/example.yaml documents them)."""

import math

import numpy as np

from dynalloc.core.allreduce import ALGORITHMS
from dynalloc.core.cluster import GROUP_KEYS, TOP_KEYS, Cluster, Group
from dynalloc.core.costs import AffineCost, TableCost
from dynalloc.core.gradients import gradient_bytes
from dynalloc.core.scenario import Change


def parse_cluster(spec):
    """The Cluster a cluster file's mapping describes; ValueError names the first bad key."""
    _mapping(
        "the cluster file", spec, TOP_KEYS, ("groups", "global_batch", "iterations", "network")
    )
    groups = spec["groups"]
    if not isinstance(groups, list) or not groups:
        raise ValueError(f"groups must be a non-empty list of groups, got {groups!r}")
    groups = tuple(_group(i, g) for i, g in enumerate(groups))
    names = [g.name for g in groups]
    if len(set(names)) < len(names):
        raise ValueError(
            f"groups: two groups are named {sorted(n for n in names if names.count(n) > 1)[0]!r}"
        )
    network = _network(spec["network"])
    gradient = spec.get("gradient")
    if gradient is not None or "exchange_s" not in network:
        gradient = _gradient(gradient)
    cluster = Cluster(
        groups=groups,
        global_batch=_integer("global_batch", spec["global_batch"], 1),
        iterations=_integer("iterations", spec["iterations"], 1),
        network=network,
        gradient=gradient,
        changes=tuple(_change(i, c, names) for i, c in enumerate(spec.get("changes") or ())),
        seed=_integer("seed", spec.get("seed", 0), 0),
        overhead_s=_number("overhead_s", spec.get("overhead_s", 0.0), 0.0),
        new_shape=_number("new_shape", spec.get("new_shape", 0.0), 0.0),
        min_share=_integer("min_share", spec.get("min_share", 1), 1),
        dataset_size=(
            None if spec.get("dataset_size") is None
            else _integer("dataset_size", spec["dataset_size"], spec["global_batch"])
        ),
    )  # fmt: skip
    lows, highs = cluster.bounds()
    if not sum(np.multiply(lows, cluster.counts)) <= cluster.global_batch:
        raise ValueError(
            f"global_batch {cluster.global_batch} is smaller than ranks x min_share = "
            f"{cluster.ranks} x {cluster.min_share}"
        )
    if cluster.global_batch > sum(np.multiply(highs, cluster.counts)):
        raise ValueError(
            f"global_batch {cluster.global_batch} exceeds what the groups' max_share allow"
        )
    return cluster


def _group(i, spec):
    where = f"groups[{i}]"
    _mapping(where, spec, GROUP_KEYS, ("name", "count", "cost"))
    name = spec["name"]
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.name must be a non-empty string, got {name!r}")
    where = f"groups[{i}] ({name})"
    return Group(
        name=name,
        count=_integer(f"{where}.count", spec["count"], 1),
        cost=_cost(f"{where}.cost", spec["cost"]),
        noise=_number(f"{where}.noise", spec.get("noise", 0.0), 0.0, 1.0),
        slowdown=_number(f"{where}.slowdown", spec.get("slowdown", 1.0), 0.0, positive=True),
        jitter=_number(f"{where}.jitter", spec.get("jitter", 0.0), 0.0, 1.0, open_high=True),
        max_share=(
            None if spec.get("max_share") is None
            else _integer(f"{where}.max_share", spec["max_share"], 1)
        ),
    )  # fmt: skip


def _cost(where, spec):
    if isinstance(spec, dict) and "table" in spec:
        _mapping(where, spec, {"table"}, ("table",))
        table = spec["table"]
        if not isinstance(table, list) or not all(
            isinstance(p, list | tuple) and len(p) == 2 for p in table
        ):
            raise ValueError(
                f"{where}.table must be a list of [batch, seconds] pairs, got {table!r}"
            )
        batches = [_integer(f"{where}.table[{k}] batch", b, 1) for k, (b, _) in enumerate(table)]
        seconds = [_number(f"{where}.table[{k}] seconds", t, 0.0) for k, (_, t) in enumerate(table)]
        try:
            return TableCost(batches, seconds)
        except ValueError as error:
            raise ValueError(f"{where}.table {error}") from None
    _mapping(where, spec, {"intercept_s", "per_sample_s"}, ("intercept_s", "per_sample_s"))
    return AffineCost(
        _number(f"{where}.intercept_s", spec["intercept_s"], 0.0),
        _number(f"{where}.per_sample_s", spec["per_sample_s"], 0.0, positive=True),
    )


def _network(spec):
    if isinstance(spec, dict) and "exchange_s" in spec:
        _mapping("network", spec, {"exchange_s"}, ())
        return {"exchange_s": _number("network.exchange_s", spec["exchange_s"], 0.0)}
    required = ("algorithm", "latency_s", "seconds_per_byte")
    _mapping("network", spec, {*required, "reduce_seconds_per_byte"}, required)
    if spec["algorithm"] not in ALGORITHMS:
        raise ValueError(
            f"network.algorithm {spec['algorithm']!r} is not one of {', '.join(ALGORITHMS)}"
        )
    return {
        "algorithm": spec["algorithm"],
        **{key: _number(f"network.{key}", spec[key], 0.0) for key in required[1:]},
        "reduce_seconds_per_byte": _number(
            "network.reduce_seconds_per_byte", spec.get("reduce_seconds_per_byte", 0.0), 0.0
        ),
    }


def _gradient(spec):
    if spec is None:
        raise ValueError("gradient is needed to cost the Allreduce: {bytes: N} or {model: NAME}")
    if isinstance(spec, dict) and "model" in spec:
        _mapping("gradient", spec, {"model"}, ())
        gradient_bytes(spec["model"])  # names an unknown model
        return {"model": spec["model"]}
    _mapping("gradient", spec, {"bytes"}, ("bytes",))
    return {"bytes": _integer("gradient.bytes", spec["bytes"], 1)}


def _change(i, spec, names):
    where = f"changes[{i}]"
    _mapping(where, spec, {"group", "factor", "start", "end"}, ("group", "factor", "start"))
    if spec["group"] not in names:
        raise ValueError(f"{where}.group {spec['group']!r} names no group ({', '.join(names)})")
    start = _integer(f"{where}.start", spec["start"], 0)
    end = spec.get("end")
    if end is not None:
        end = _integer(f"{where}.end", end, start + 1)
    factor = _number(f"{where}.factor", spec["factor"], 0.0, positive=True)
    return Change(rank=names.index(spec["group"]), start=start, end=end, factor=factor)


def _mapping(where, spec, allowed, required):
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be a mapping, got {spec!r}")
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )
    missing = [key for key in required if key not in spec]
    if missing:
        raise ValueError(f"{where}: missing key {missing[0]!r}")


def _integer(where, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{where} must be an integer >= {low}, got {value!r}")
    return value


def _number(where, value, low, high=math.inf, positive=False, open_high=False):
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if positive else value >= low) and (
            value < high if open_high else value <= high
        )
    if not ok:
        lower = f"> {low}" if positive else f">= {low}"
        upper = "" if high == math.inf else f" and {'<' if open_high else '<='} {high}"
        raise ValueError(f"{where} must be a finite number {lower}{upper}, got {value!r}")
    return float(value)
