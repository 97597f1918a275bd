"""A modelled cluster of `dynalloc simulate`: groups of identical ranks, the network, the
gradient, the run. `core.cluster_file` reads one from a cluster file; config/clusters/example.yaml
documents every key with an example.

Ranks are laid out group after group, so a group is a slice and its ranks are evaluated in one
call. A group's slowdowns follow the scenarios of training runs (`dynalloc.core.scenario`): a
static `slowdown`, a `jitter` j that multiplies each rank's time by a factor drawn anew each
iteration from [1, 1 + 2j], and `changes`, spans [start, end) of iterations in which a group is
`factor` times slower. On top of that, `noise` is the rank's own variation: a relative standard
deviation, drawn lognormal (mean 1, never negative; measured residuals are skewed to the slow
side the same way). Every problem is a ValueError naming the key.
"""

from dataclasses import dataclass, replace

import numpy as np

from dynalloc.core.allreduce import allreduce_seconds
from dynalloc.core.costs import AffineCost, TableCost
from dynalloc.core.gradients import gradient_bytes

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
        """The cluster as a cluster file's mapping (`cluster_file.parse_cluster` reads it)."""
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
