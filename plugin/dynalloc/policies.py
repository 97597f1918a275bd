"""Allocation policies: from the shares just used and each rank's compute time, the next shares.

Every rank runs the same policy on the same allgathered numbers, so all agree on the next split
without a master. All policies share one contract, enforced here: shares are integers that sum
exactly to the global batch and lie within `[min_share, max_share]`, and a measurement that is
zero, negative, NaN or infinite leaves the shares as they were (with one warning).
"""

import warnings

import numpy as np

from dynalloc.costmodel import AffineCostModel
from dynalloc.shares import check_bounds, equal_shares, minmax_shares, proportional_shares
from dynalloc.speedtest import EqualSpeedTest


class Policy:
    """Base of all policies; subclasses implement `_next(shares, seconds, iteration, epoch)`.

    Usage, once per iteration on every rank::

        shares = policy.shares                      # the split for the first iteration
        ...                                         # each rank computes its share, times it
        shares = policy.update(shares, compute_s, iteration + 1, epoch_of_next)
    """

    name = ""

    def __init__(self, ranks, global_batch, min_share=1, max_share=None):
        check_bounds(ranks, global_batch, min_share, max_share)
        self.ranks, self.global_batch = ranks, global_batch
        self.min_share, self.max_share = min_share, max_share
        self.shares = self.initial_shares()
        self._warned = False

    def initial_shares(self):
        return equal_shares(self.ranks, self.global_batch, self.min_share, self.max_share)

    def split(self, weights_or_costs):
        return proportional_shares(
            weights_or_costs, self.global_batch, self.min_share, self.max_share
        )

    def update(self, shares, compute_s, iteration, epoch):
        """Next shares of the global batch after an iteration that used `shares`.

        `shares` may sum to less than the global batch (an epoch's last, smaller batch);
        `iteration` and `epoch` number the iteration that the returned shares are for.
        """
        shares = np.asarray(shares, dtype=np.int64)
        seconds = np.asarray(compute_s, dtype=float)
        if shares.shape != (self.ranks,) or seconds.shape != (self.ranks,):
            raise ValueError(f"expected {self.ranks} shares and times, got {shares} and {seconds}")
        if not np.all(np.isfinite(seconds) & (seconds > 0)):
            if not self._warned:
                warnings.warn(
                    f"{self.name}: unusable compute times {seconds.tolist()} at iteration "
                    f"{iteration}; keeping the previous shares (warned once)",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._warned = True
            return self.shares.copy()
        self.shares = np.asarray(self._next(shares, seconds, iteration, epoch), dtype=np.int64)
        return self.shares.copy()

    def _next(self, shares, seconds, iteration, epoch):
        raise NotImplementedError


class StaticPolicy(Policy):
    """Equal split forever: what MXNet dist_sync, Horovod and PyTorch DDP do."""

    name = "static"

    def _next(self, shares, seconds, iteration, epoch):
        return self.shares


class ProportionalPolicy(Policy):
    """The seed paper: after every iteration, shares proportional to last measured samples/s."""

    name = "proportional"

    def __init__(self, ranks, global_batch, min_share=1, max_share=None):
        super().__init__(ranks, global_batch, min_share, max_share)
        self.speed = np.ones(ranks)

    def _next(self, shares, seconds, iteration, epoch):
        measured = shares > 0  # a rank without samples keeps its last known speed
        self.speed[measured] = shares[measured] / seconds[measured]
        return self.split(self.speed)


class DBSPolicy(Policy):
    """DBS/DLB (Ye et al. 2020): once per epoch, shares proportional to each rank's epoch
    throughput; within an epoch the split stays fixed."""

    name = "dbs"

    def __init__(self, ranks, global_batch, min_share=1, max_share=None):
        super().__init__(ranks, global_batch, min_share, max_share)
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
        gain=0.5, dead_band=0.05, max_step=0.5,
    ):  # fmt: skip
        super().__init__(ranks, global_batch, min_share, max_share)
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

    def __init__(self, ranks, global_batch, min_share=1, max_share=None, speeds=None):
        if speeds is None or len(speeds) != ranks:
            raise ValueError(f"oracle needs one speed per rank ({ranks}), got {speeds}")
        self.speeds = np.asarray(speeds, dtype=float)
        if not np.all(np.isfinite(self.speeds) & (self.speeds > 0)):
            raise ValueError(f"oracle speeds must be positive, got {list(speeds)}")
        super().__init__(ranks, global_batch, min_share, max_share)

    def initial_shares(self):
        return self.split(self.speeds)

    def _next(self, shares, seconds, iteration, epoch):
        return self.shares


class AdaptivePolicy(Policy):
    """Ours: per-rank online affine cost models; the split that minimises the slowest rank's
    predicted time exactly (integers, bounds); no move while the predicted spread of finish times
    is within `dead_band`, and a step shrunk towards zero when that spread is within `confidence`
    standard errors of the estimates (so noise does not move shares). What sets the split is each
    rank's speed relative to the others, so the models see times divided by the slowdown the
    ranks share (an OS hiccup, the machine's drift). A confirmed change of a rank's speed rescales
    its model and moves at once, with full steps for `settle` iterations while the rescaled model
    finds the new balance. One deviation confirms a change when the rank's time doubled or halved
    (`jump`), and while the ranks settle after a change (a rank sharing a core or a link with the
    changed one changes with it); a confirmed change also confirms the deviations held back on
    other ranks (with two ranks, a change of either shows on both once the common slowdown is
    divided out). A smaller change is confirmed by the cost model's cumulative sum of errors.
    The first iteration (MXNet's warm-up) counts only when it shows a jump, which the ranks then
    settle after as after any change. Until a jump shows, the split the run starts from is held
    while an F-test on the times measured there finds no difference of speed at `significance`
    (`dynalloc.speedtest`): under pure per-iteration jitter that equal split is the best there is,
    and the first noisy times would otherwise move it (1 lets them, as before the test)."""

    name = "adaptive"

    def __init__(
        self, ranks, global_batch, min_share=1, max_share=None,
        dead_band=0.02, confidence=1.0, settle=3, min_move=0.02, jump=2.0, significance=0.001,
        **model,
    ):  # fmt: skip
        super().__init__(ranks, global_batch, min_share, max_share)
        numbers = (dead_band, confidence, settle, min_move, jump, significance)
        if not (
            all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers)
            and 0 <= dead_band < 1
            and confidence >= 0
            and settle >= 0
            and 0 <= min_move < 1
            and jump > 1
            and 0 < significance <= 1
        ):
            raise ValueError(
                f"adaptive needs 0 <= dead_band < 1, confidence >= 0, settle >= 0, "
                f"0 <= min_move < 1, jump > 1 and 0 < significance <= 1, got "
                f"dead_band={dead_band!r}, confidence={confidence!r}, settle={settle!r}, "
                f"min_move={min_move!r}, jump={jump!r}, significance={significance!r}"
            )
        self.dead_band, self.confidence = dead_band, confidence
        self.settle, self.settling = settle, 0
        self.min_move, self.jump = min_move, jump
        self.significance = significance
        check_model_parameters(model)
        self.models = [AffineCostModel(**model) for _ in range(ranks)]
        self.warm_up = True  # the next update reports MXNet's first iteration
        self.start_test = EqualSpeedTest(ranks)
        self.holding = True  # the start split, until the ranks are shown to differ

    def _next(self, shares, seconds, iteration, epoch):
        used = shares > 0  # an epoch's last batch may leave a rank without samples
        if self.warm_up:
            self.warm_up = False
            if self._warm_up_noise(shares, seconds, used):
                return self.shares
            self.settling = self.settle  # a jump: the ranks settle after it as after a change
            self.holding = False
        settling = 1 if self.settling else None
        confirm = [settling] * self.ranks
        jumped = np.zeros(self.ranks, dtype=bool)
        if all(model.fitted for model in self.models) and used.any():
            sizes = np.maximum(shares, 1)
            predicted = np.array(
                [m.predict(int(b)) for m, b in zip(self.models, sizes, strict=True)]
            )
            ratios = seconds / predicted
            seconds = seconds / float(np.median(ratios[used]))
            # A rank whose time doubled or halved against its model changed: no noise does that.
            jumped = (ratios >= self.jump) | (ratios <= 1.0 / self.jump)
            confirm = [1 if jump else settling for jump in jumped]
        confirmed = [
            share > 0 and model.observe(int(share), float(time), needed)
            for model, share, time, needed in zip(
                self.models, shares, seconds, confirm, strict=True
            )
        ]
        if any(confirmed):
            self.settling = self.settle
            for model in self.models:
                model.confirm_pending()
        if self.holding and self._holds_start(shares, seconds, jumped):
            self.settling = 0  # a drift confirmed under jitter is no reason to move either
            return self.shares
        changed = self.settling > 0
        self.settling = max(self.settling - 1, 0)
        if not all(model.fitted for model in self.models):
            return self.shares
        a, c = np.array([model.coefficients() for model in self.models]).T
        best = minmax_shares(a, c, self.global_batch, self.min_share, self.max_share)
        now = a + c * self.shares
        spread = (now.max() - now.min()) / now.mean()
        if not changed and spread <= self.dead_band:
            return self.shares
        # Move as far as the evidence carries: all the way after a confirmed change, or when the
        # imbalance dwarfs the estimates' standard error, a little when it is within the noise.
        errors = sorted(model.uncertainty() for model in self.models)[-2:]
        doubt = self.confidence * float(np.sqrt(np.sum(np.square(errors))))
        step = 1.0 if changed else spread**2 / (spread**2 + doubt**2)
        moved = self.split(np.maximum(self.shares + step * (best - self.shares), 1e-9))
        # Every new share is a new input shape, which MXNet pays for in memory planning: a
        # creep of a sample or two costs more than the imbalance it removes.
        relative = np.abs(moved - self.shares) / np.maximum(self.shares, 1)
        if not changed and relative.max() < self.min_move:
            return self.shares
        return moved

    def _holds_start(self, shares, seconds, jumped):
        """Whether the split the run started from stays: until some rank's time jumps (all of
        them at once is a slowdown they share) or the times measured at that split reject equal
        speeds (an epoch's shorter last batch, at another split, is left out of the test)."""
        if np.array_equal(shares, self.shares) and np.all(shares > 0):
            self.start_test.observe(seconds / shares)
        differ = jumped.any() and not jumped.all()
        self.holding = not (differ or self.start_test.p_value() < self.significance)
        return self.holding

    def _warm_up_noise(self, shares, seconds, used):
        """Whether the first iteration's times are MXNet's warm-up (binding the graph, planning
        memory), which makes identical ranks differ by up to a quarter, rather than a difference
        of speed: only ranks `jump` times apart in per-sample time show through it. Warm-up
        noise is left out of the models, which start with the next iteration."""
        per_sample = seconds[used] / shares[used]
        return per_sample.max() < self.jump * per_sample.min()


MODEL_PARAMETERS = {  # name: (lowest, highest) accepted value of the cost model's tunables
    "forgetting": (0.0, 0.999999),
    "intercept_fraction": (0.0, 0.95),
    "prior_strength": (0.0, 1e6),
    "change_threshold": (0.0, 1e6),
    "noise_multiplier": (0.0, 1e6),
    "drift_slack": (0.0, 1e6),
    "confirm": (1, 100),
}


def check_model_parameters(params):
    """ValueError naming an unknown or out-of-range tunable of the adaptive cost model."""
    for name, value in params.items():
        if name not in MODEL_PARAMETERS:
            raise ValueError(
                f"adaptive has no parameter {name!r}; its parameters: dead_band, "
                f"confidence, settle, min_move, jump, significance, "
                f"{', '.join(MODEL_PARAMETERS)}"
            )
        lowest, highest = MODEL_PARAMETERS[name]
        kind = int if name == "confirm" else (int, float)
        if (
            isinstance(value, bool)
            or not isinstance(value, kind)
            or not (lowest <= value <= highest)
        ):
            raise ValueError(
                f"adaptive {name} must be a number in [{lowest}, {highest}], got {value!r}"
            )


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


def make_policy(name, ranks, global_batch, min_share=1, max_share=None, **params):
    """The policy called `name`; ValueError names an unknown policy or parameter."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    try:
        return POLICIES[name](ranks, global_batch, min_share, max_share, **params)
    except TypeError as error:  # an unexpected keyword: name it without a traceback
        raise ValueError(f"policy {name!r}: {error}") from None
