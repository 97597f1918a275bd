"""`adaptive`, our policy: per-rank online affine cost models and the exact min-max split, moved
only as far as the evidence carries (see the class docstring for the whole argument)."""

import math

import numpy as np

from dynalloc.core.costmodel import AffineCostModels, check_model_parameters
from dynalloc.core.policy import POOL_S, Policy
from dynalloc.core.shares import minmax_shares
from dynalloc.core.speedtest import EqualSpeedTest
from dynalloc.core.state import export, restore


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
    changed one changes with it); but a jump that goes back the next iteration was a spike (a
    preempted core, a slow read): it is forgotten as if unseen, and from then on a jump needs
    `confirm` deviations in a row like any other change. A confirmed change also confirms the
    deviations held back on other ranks (with two ranks, a change of either shows on both once
    the common slowdown is divided out). A smaller change is confirmed by the cost model's
    cumulative sum of errors.
    The first iteration (MXNet's warm-up) counts only when it shows a jump, which the ranks then
    settle after as after any change. Until a jump shows, the split the run starts from is held
    while an F-test on the times measured there finds no difference of speed at `significance`
    (`speedtest`): under pure per-iteration jitter that equal split is the best there is,
    and the first noisy times would otherwise move it (1 lets them, as before the test)."""

    name = "adaptive"

    def __init__(
        self, ranks, global_batch, min_share=1, max_share=None,
        dead_band=0.02, confidence=1.0, settle=3, min_move=0.02, jump=2.0, significance=0.001,
        pool_s=POOL_S, **model,
    ):  # fmt: skip
        super().__init__(ranks, global_batch, min_share, max_share, pool_s)
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
        self.models = AffineCostModels(ranks, **model)
        self.warm_up = True  # the next update reports MXNet's first iteration
        self.start_test = EqualSpeedTest(ranks)
        self.holding = True  # the start split, until the ranks are shown to differ
        self.common = 1.0  # the slowdown all ranks shared at the last iteration, as models see it
        self.jumped, self.before_jump = None, None  # the last iteration's jumps, and before them
        self.spiky = False  # a jump went back at once: jumps need `confirm` deviations in a row
        self.unproven = np.zeros(ranks, dtype=bool)  # then, the jumps still to be confirmed

    def warm(self, intercepts, slopes, noise=None):
        """Start from known costs (a previous run's fit, a cluster file, a probe): each rank's
        model seeded with `a + c b` around the split those costs balance, and that split taken
        at once, without the equal split's test; `noise`, the relative spread of the ranks'
        times, where it is known. The seed weighs a few iterations' data, so measurements
        overrule it within the forgetting's horizon."""
        a, c = np.asarray(intercepts, dtype=float), np.asarray(slopes, dtype=float)
        if a.shape != (self.ranks,) or c.shape != (self.ranks,):
            raise ValueError(f"a warm start needs costs of {self.ranks} ranks, got {len(a)}")
        if not (np.isfinite(a) & (a >= 0) & np.isfinite(c) & (c > 0)).all():
            raise ValueError("a warm start needs intercepts >= 0 and per-sample costs > 0")
        self.shares = minmax_shares(a, c, self.global_batch, bounds=self.bounds)
        self.models.seed(a, c, self.shares, None if noise is None else float(noise))
        self.holding = False

    def _next(self, shares, seconds, iteration, epoch):
        used = shares > 0  # an epoch's last batch may leave a rank without samples
        if self.warm_up:
            self.warm_up = False
            if self._warm_up_noise(shares, seconds, used):
                return self.shares
            self.settling = self.settle  # a jump: the ranks settle after it as after a change
            self.holding = False
        common = self.common
        predicted, scaled, jumps = self._against_models(shares, seconds, used)
        if self.jumped is not None:
            last, before = self.jumped, self.before_jump
            self.jumped = self.before_jump = None
            if (jumps[last != 0] == -last[last != 0]).all():
                # The jump went back at once: a spike (a preempted core, a slow read), not a
                # change of speed. Forget it as if unseen; from now on jumps prove themselves.
                self._restore(before)
                self.spiky = True
                predicted, scaled, jumps = self._against_models(shares, seconds, used)
        jumped = jumps != 0
        if jumped.any() and not jumped.all() and not self.spiky:  # to be acted on at once
            self.jumped, self.before_jump = jumps, self._state(common)
        models = self.models
        needed = 1 if self.settling else models.confirm
        if jumped.any() and not self.spiky:
            needed = np.where(jumped, 1, needed)
        first = jumped & (models.pending.length == 0)  # jumps that start a run of deviations
        confirmed = models.observe(shares, scaled, predicted, needed)
        if confirmed.any():
            self.settling = self.settle
            models.confirm_pending()
        if self.spiky:  # a jump counts once the deviations in a row it started are confirmed
            unproven = self.unproven | first
            jumped = unproven & confirmed
            self.unproven = unproven & ~confirmed & (models.pending.length > 0)
        if self.holding and self._holds_start(shares, scaled, jumped, jumps.any()):
            self.settling = 0  # a drift confirmed under jitter is no reason to move either
            return self.shares
        changed = self.settling > 0
        self.settling = max(self.settling - 1, 0)
        if not models.complete:
            return self.shares
        a, c = models.coefficients()
        now = a + c * self.shares
        spread = (now.max() - now.min()) / now.mean()
        if not changed and spread <= self.dead_band:
            return self.shares
        best = minmax_shares(a, c, self.global_batch, bounds=self.bounds)
        # Move as far as the evidence carries: all the way after a confirmed change, or when the
        # imbalance dwarfs the estimates' standard error, a little when it is within the noise.
        uncertain = models.uncertainty()
        errors = np.partition(uncertain, self.ranks - 2)[self.ranks - 2 :].tolist()  # top two
        doubt = self.confidence * math.sqrt(sum(error * error for error in errors))
        step = 1.0 if changed else spread**2 / (spread**2 + doubt**2)
        moved = self.split(np.maximum(self.shares + step * (best - self.shares), 1e-9))
        # Every new share is a new input shape, which MXNet pays for in memory planning: a
        # creep of a sample or two costs more than the imbalance it removes.
        relative = np.abs(moved - self.shares) / np.maximum(self.shares, 1)
        if not changed and relative.max() < self.min_move:
            return self.shares
        return moved

    def _against_models(self, shares, seconds, used):
        """(predicted seconds, `seconds` over the slowdown all ranks share, jumps): +1 where a
        rank's time doubled against its model, -1 where it halved, which noise does not do
        (a spike does, for one iteration: `_next`). Judged against the slowdown the ranks
        shared at the last iteration, as the models see the times: the models learn times over
        that slowdown, so their own scale is where they started, and the whole machine may
        have drifted from it since."""
        predicted = self.models.predict(np.maximum(shares, 1))
        jumps = np.zeros(self.ranks, dtype=np.int8)
        if not (self.models.complete and used.any()):
            return predicted, seconds, jumps
        ratios = seconds / predicted
        common = median(ratios[used])
        ratios = ratios / self.common
        jumps[ratios >= self.jump] = 1
        jumps[ratios <= 1.0 / self.jump] = -1
        self.common = common
        return predicted, seconds / common, jumps

    def _state(self, common):
        """What an iteration changes, as plain data (a checkpoint holds it with the policy),
        for `_next` to forget a spike: the iteration before it, `common` the slowdown shared
        then. Taken only on a jump."""
        return {"models": export(self.models), "start_test": export(self.start_test),
                "shares": self.shares.copy(), "settling": self.settling,
                "holding": self.holding, "common": common}  # fmt: skip

    def _restore(self, state):
        restore(self.models, state["models"])
        restore(self.start_test, state["start_test"])
        self.shares, self.settling = state["shares"].copy(), state["settling"]
        self.holding, self.common = state["holding"], state["common"]

    def _holds_start(self, shares, seconds, jumped, spiked):
        """Whether the split the run started from stays: until some rank's time jumps (once
        spikes have shown, a jump its next deviations confirm; all of them at once is a
        slowdown they share) or the times measured at that split reject equal speeds (an
        epoch's shorter last batch, at another split, is left out of the test, and so is an
        iteration where a time `spiked`, doubled or halved: spikes on one rank would add up
        to a difference of speed)."""
        if (shares == self.shares).all() and (shares > 0).all() and not spiked:
            self.start_test.observe(seconds / shares)
        differ = jumped.any() and not jumped.all()
        self.holding = not (differ or self.start_test.differs(self.significance))
        return self.holding

    def _warm_up_noise(self, shares, seconds, used):
        """Whether the first iteration's times are MXNet's warm-up (binding the graph, planning
        memory), which makes identical ranks differ by up to a quarter, rather than a difference
        of speed: only ranks `jump` times apart show through it, in per-sample time or, after a
        warm start, against their models (the slowdown the warm-up puts on all ranks divided
        out). Warm-up noise is left out of the models."""
        if self.models.complete:  # warm: the models predict the first iteration
            ratios = seconds[used] / self.models.predict(np.maximum(shares, 1))[used]
            ratios = ratios / median(ratios)
            return bool(((ratios < self.jump) & (ratios > 1.0 / self.jump)).all())
        per_sample = seconds[used] / shares[used]
        return per_sample.max() < self.jump * per_sample.min()


def median(values):
    """`np.median` of finite values, the same number, at a tenth of its cost on a few values
    (its generality costs as much as a whole policy update on four ranks)."""
    middle = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, middle)[middle])
    below, above = np.partition(values, (middle - 1, middle))[middle - 1 : middle + 1]
    return float((below + above) / 2)
