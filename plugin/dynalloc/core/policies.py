"""The allocation policies by name: the simple rules of the seed paper and its peers beside ours
(`adaptive`), so that comparing them is always one config key away. Their shared contract is
`dynalloc.core.policy.Policy`."""

from collections.abc import Mapping

import numpy as np

from dynalloc.core.adaptive import AdaptivePolicy
from dynalloc.core.policy import POOL_S, Policy


class StaticPolicy(Policy):
    """Equal split forever: what MXNet dist_sync, Horovod and PyTorch DDP do."""

    name = "static"

    def _next(self, shares, seconds, iteration, epoch):
        return self.shares


class ProportionalPolicy(Policy):
    """The seed paper: after every iteration, shares proportional to last measured samples/s."""

    name = "proportional"

    def __init__(self, ranks, global_batch, min_share=1, max_share=None, pool_s=POOL_S):
        super().__init__(ranks, global_batch, min_share, max_share, pool_s)
        self.speed = np.ones(ranks)

    def _next(self, shares, seconds, iteration, epoch):
        measured = shares > 0  # a rank without samples keeps its last known speed
        self.speed[measured] = shares[measured] / seconds[measured]
        return self.split(self.speed)


class DBSPolicy(Policy):
    """DBS/DLB (Ye et al. 2020): once per epoch, shares proportional to each rank's epoch
    throughput; within an epoch the split stays fixed."""

    name = "dbs"

    def __init__(self, ranks, global_batch, min_share=1, max_share=None, pool_s=POOL_S):
        super().__init__(ranks, global_batch, min_share, max_share, pool_s)
        self.epoch = 0
        self.samples = np.zeros(ranks)
        self.seconds = np.zeros(ranks)

    def _next(self, shares, seconds, iteration, epoch):
        self.samples += shares
        self.seconds += seconds
        if epoch == self.epoch:
            return self.shares
        self.epoch = epoch
        throughput = np.where(self.samples > 0, self.samples / self.seconds, 0.0)
        self.samples[:], self.seconds[:] = 0.0, 0.0
        if not np.all(throughput > 0):
            return self.shares
        return self.split(throughput)


class ControllerPolicy(Policy):
    """After OmniLearn (Tyagi & Sharma 2025): a proportional controller on each rank's relative
    time error, idle inside a dead band, each step bounded to a fraction of the share."""

    name = "controller"

    def __init__(
        self, ranks, global_batch, min_share=1, max_share=None,
        gain=0.5, dead_band=0.05, max_step=0.5, pool_s=POOL_S,
    ):  # fmt: skip
        super().__init__(ranks, global_batch, min_share, max_share, pool_s)
        if not (0 < gain <= 1 and 0 <= dead_band < 1 and 0 < max_step <= 1):
            raise ValueError(
                f"controller needs 0 < gain <= 1, 0 <= dead_band < 1, 0 < max_step <= 1, "
                f"got gain={gain}, dead_band={dead_band}, max_step={max_step}"
            )
        self.gain, self.dead_band, self.max_step = gain, dead_band, max_step

    def _next(self, shares, seconds, iteration, epoch):
        error = seconds / seconds.mean() - 1.0
        if np.max(np.abs(error)) <= self.dead_band:
            return self.shares
        step = np.clip(-self.gain * error, -self.max_step, self.max_step)
        return self.split(np.maximum(self.shares * (1.0 + step), 1e-9))


class OraclePolicy(Policy):
    """Fixed shares proportional to relative speeds known in advance: a reference, not a policy."""

    name = "oracle"

    def __init__(
        self, ranks, global_batch, min_share=1, max_share=None, speeds=None, pool_s=POOL_S
    ):
        if speeds is None or len(speeds) != ranks:
            raise ValueError(f"oracle needs one speed per rank ({ranks}), got {speeds}")
        self.speeds = np.asarray(speeds, dtype=float)
        if not np.all(np.isfinite(self.speeds) & (self.speeds > 0)):
            raise ValueError(f"oracle speeds must be positive, got {list(speeds)}")
        super().__init__(ranks, global_batch, min_share, max_share, pool_s)

    def initial_shares(self):
        return self.split(self.speeds)

    def _next(self, shares, seconds, iteration, epoch):
        return self.shares


POLICIES = {
    policy.name: policy
    for policy in (
        StaticPolicy,
        ProportionalPolicy,
        DBSPolicy,
        ControllerPolicy,
        OraclePolicy,
        AdaptivePolicy,
    )
}


# The policies that need nothing but measured times, so a replay can drive them on a run's logs
# (oracle needs the speeds in advance).
REPLAYABLE = ("static", "proportional", "dbs", "controller", "adaptive")


def make_policy(spec, ranks, global_batch, min_share=1, max_share=None):
    """The policy that `spec` names, as it comes from the config: a name, or a mapping of its
    `name` and parameters. ValueError names an unknown policy or parameter."""
    params = dict(spec) if isinstance(spec, Mapping) else {"name": spec}
    name = params.pop("name", None)
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    try:
        return POLICIES[name](ranks, global_batch, min_share, max_share, **params)
    except TypeError as error:  # an unexpected keyword: name it without a traceback
        raise ValueError(f"policy {name!r}: {error}") from None
