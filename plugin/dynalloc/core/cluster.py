"""A modelled cluster, the cluster file of `dynalloc simulate`: groups of identical ranks, the
network, the gradient, the run. config/clusters/example.yaml documents every key with an example.

Ranks are laid out group after group, so a group is a slice and its ranks are evaluated in one
call. A group's slowdowns follow the scenarios of training runs (`dynalloc.core.scenario`): a
static `slowdown`, a `jitter` j that multiplies each rank's time by a factor drawn anew each
iteration from [1, 1 + 2j], and `changes`, spans [start, end) of iterations in which a group is
`factor` times slower. On top of that, `noise` is the rank's own variation: a relative standard
deviation, drawn lognormal (mean 1, never negative; measured residuals are skewed to the slow
side the same way). Every problem is a ValueError naming the key.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from dynalloc.core.allreduce import ALGORITHMS, allreduce_seconds
from dynalloc.core.costs import AffineCost, TableCost
from dynalloc.core.gradients import gradient_bytes
from dynalloc.core.scenario import Change

TOP_KEYS = {"groups", "global_batch", "iterations", "seed", "network", "gradient", "changes",
            "overhead_s", "new_shape", "min_share", "dataset_size"}  # fmt: skip
GROUP_KEYS = {"name", "count", "cost", "noise", "slowdown", "jitter", "max_share"}


@dataclass(frozen=True)
class Group:
    name: str
    count: int
    cost: AffineCost | TableCost
    noise: float = 0.0
    slowdown: float = 1.0
    jitter: float = 0.0
    max_share: int | None = None


@dataclass(frozen=True)
class Cluster:
    groups: tuple
    global_batch: int
    iterations: int
    network: dict
    gradient: dict | None = None
    changes: tuple = ()  # scenario Changes whose `rank` is the index of the group they slow
    seed: int = 0
    overhead_s: float = 0.0
    new_shape: float = 0.0
    min_share: int = 1
    dataset_size: int | None = None

    @property
    def ranks(self):
        return int(sum(g.count for g in self.groups))

    @property
    def counts(self):
        return np.array([g.count for g in self.groups], dtype=np.int64)

    def slices(self):
        ends = np.cumsum(self.counts)
        return [
            slice(int(end - g.count), int(end)) for g, end in zip(self.groups, ends, strict=True)
        ]

    def per_rank(self, values):
        """One value per group, repeated for each of its ranks."""
        return np.repeat(np.asarray(values, dtype=float), self.counts)

    def bounds(self):
        """Each group's lowest and highest share."""
        highs = [self.global_batch if g.max_share is None else g.max_share for g in self.groups]
        return [self.min_share] * len(self.groups), highs

    def share_bounds(self):
        """(min_share, max_share) as make_policy takes them: max_share None, or one per rank."""
        if all(g.max_share is None for g in self.groups):
            return self.min_share, None
        return self.min_share, [g.max_share for g in self.groups for _ in range(g.count)]

    def seconds(self, shares):
        """Each rank's compute seconds for `shares` at full speed, without noise."""
        out = np.empty(len(shares))
        for group, where in zip(self.groups, self.slices(), strict=True):
            out[where] = group.cost(shares[where])
        return out

    def factors(self, iteration, draws=None):
        """Per group, how much slower its ranks run at `iteration`: static slowdown times the
        active changes times the jitter, at its mean (1 + j) or, per rank, from `draws`
        (uniform in [-1, 1], one per rank) as a scenario draws it."""
        factors = np.array([g.slowdown for g in self.groups])
        for change in self.changes:
            if change.active(iteration):
                factors[change.rank] *= change.factor
        jitter = np.array([g.jitter for g in self.groups])
        if draws is None:
            return factors * (1.0 + jitter)
        return self.per_rank(factors) * (1.0 + self.per_rank(jitter) * (1.0 + draws))

    def exchange_s(self):
        """Seconds of one gradient Allreduce: measured (`exchange_s`), or from the formulas."""
        net = self.network
        if "exchange_s" in net:
            return float(net["exchange_s"])
        return allreduce_seconds(
            net["algorithm"], self.ranks, gradient_size(self.gradient), net["latency_s"],
            net["seconds_per_byte"], net.get("reduce_seconds_per_byte", 0.0),
        )  # fmt: skip

    def resized(self, size):
        """The cluster with every group `size` times as many ranks (at least one) and the
        global batch grown with them, so each rank's share stays what it was (weak scaling)."""
        groups = tuple(replace(g, count=max(1, round(g.count * size))) for g in self.groups)
        batch = max(1, round(self.global_batch * sum(g.count for g in groups) / self.ranks))
        return replace(self, groups=groups, global_batch=batch)

    def stretched(self, heterogeneity):
        """The cluster with each group's slowness at the equal split (its time over the fastest
        group's) scaled from s to 1 + heterogeneity (s - 1): 0 makes the groups equally fast,
        1 keeps the file's, 2 doubles each group's excess over the fastest."""
        share = np.array([self.global_batch / self.ranks])
        times = np.array([g.cost(share)[0] for g in self.groups]) * self.factors(0)
        slowness = times / times.min()
        scale = (1.0 + heterogeneity * (slowness - 1.0)) / slowness
        groups = tuple(
            replace(g, slowdown=g.slowdown * float(s))
            for g, s in zip(self.groups, scale, strict=True)
        )
        return replace(self, groups=groups)

    def spec(self):
        """The cluster as a cluster file's mapping (what `parse_cluster` reads back)."""
        names = [g.name for g in self.groups]
        spec = {
            "global_batch": self.global_batch,
            "iterations": self.iterations,
            "seed": self.seed,
            "min_share": self.min_share,
            "overhead_s": self.overhead_s,
            "new_shape": self.new_shape,
            "network": dict(self.network),
        }
        if self.dataset_size is not None:
            spec["dataset_size"] = self.dataset_size
        if self.gradient is not None:
            spec["gradient"] = dict(self.gradient)
        spec["groups"] = [
            {"name": g.name, "count": g.count, "cost": g.cost.spec(), "noise": g.noise,
             "slowdown": g.slowdown, "jitter": g.jitter}
            | ({} if g.max_share is None else {"max_share": g.max_share})
            for g in self.groups
        ]  # fmt: skip
        if self.changes:
            spec["changes"] = [
                {"group": names[c.rank], "factor": c.factor, "start": c.start, "end": c.end}
                for c in self.changes
            ]
        return spec


def gradient_size(gradient):
    """Bytes of the gradient spec `{bytes: N}` or `{model: NAME}`."""
    return gradient["bytes"] if "bytes" in gradient else gradient_bytes(gradient["model"])


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
