"""Online affine cost model of one rank, `t = a + c * b`, with forgetting and a change detector.

Why affine: Python, kernel launches and small-batch inefficiency cost a fixed `a` per iteration,
so time is not proportional to the share; a rule that assumes it is over-corrects when shares get
small. Why a prior: while the shares stay put, the data cannot separate `a` from `c`, so a weak
prior on the intercept's fraction of the time settles that direction (at a fixed point any split
that fits the observation predicts the same time, so the prior costs nothing there). Why a change
detector: exponential forgetting alone takes many iterations to follow a rank that suddenly runs
three times slower; a confirmed change instead rescales the model at once. A change too small
to stand out of the noise in one look (a rank that gets more of a shared core as its neighbour
slows) is confirmed by a cumulative sum (CUSUM) of the errors beyond the noise: a one-sided run
that keeps coming adds up where each deviation alone would be noise.
"""

import math
from dataclasses import dataclass, field


@dataclass
class AffineCostModel:
    """Exponentially weighted ridge fit of `t = a + c*b` for one rank.

    forgetting: weight kept by past observations per new one (0.95 ~ the last 20 iterations;
        abrupt changes are the change detector's job, not the forgetting's).
    intercept_fraction: prior share of the time that does not depend on the batch share.
    prior_strength: weight of that prior relative to the data's (small: the data wins once the
        shares have moved enough to tell `a` from `c`).
    change_threshold: least relative prediction error taken as a change of speed (a rank losing
        a fifth of its speed to a neighbour counts), raised to
        `noise_multiplier` times the usual error on noisy ranks; also the level a drift's
        summed excess must reach.
    drift_slack: errors within this many times the usual error add nothing to a drift (the
        CUSUM's allowance: ~1.6 standard deviations, so noise alone rarely builds a drift).
    confirm: consecutive same-direction deviations needed to declare a change (1 reacts at once;
        2 ignores a single outlier at the cost of one iteration).
    """

    forgetting: float = 0.95
    intercept_fraction: float = 0.1
    prior_strength: float = 0.05
    change_threshold: float = 0.25
    noise_multiplier: float = 4.0
    confirm: int = 2
    drift_slack: float = 2.0
    noise: float = 0.05  # exponentially weighted mean absolute relative error
    sums: list = field(default_factory=lambda: [0.0] * 6)  # W, Sb, Sbb, St, Sbt, sum of w^2
    pending: list = field(default_factory=list)  # unconfirmed deviating observations (b, t, e)
    drifting: list = field(default_factory=list)  # the CUSUM run's observations (b, t, e)
    drift: float = 0.0  # the run's summed excess over the slack

    @property
    def fitted(self):
        return self.sums[0] > 0

    def coefficients(self):
        """(a, c) of the current fit; requires at least one observation."""
        w, sb, sbb, st, sbt, _ = self.sums
        mean_b, mean_t = sb / w, st / w
        prior_a = self.intercept_fraction * mean_t
        rho = self.prior_strength * w
        # Normal equations of sum w (t - a - c b)^2 + rho (a - prior_a)^2.
        m11, m12, m22 = w + rho, sb, sbb
        r1, r2 = st + rho * prior_a, sbt
        det = m11 * m22 - m12 * m12
        a = (r1 * m22 - m12 * r2) / det if det > 0 else prior_a
        # A local fit: a negative intercept is how a superlinear cost looks near the data.
        a = min(max(a, -0.5 * mean_t), 0.95 * mean_t)
        c = (mean_t - a) / mean_b
        return a, c

    def uncertainty(self):
        """Relative standard error of the fitted level: the noise over the effective sample
        count. A move smaller than this is as likely to chase noise as to help."""
        w, squares = self.sums[0], self.sums[5]
        return 1.25 * self.noise * squares**0.5 / w  # 1.25: mean absolute error -> std

    def predict(self, share):
        a, c = self.coefficients()
        # Far below the data, a negative local intercept would predict a negative time, and a
        # change detected against it would rescale the history by a negative ratio.
        _, sb, _, st, _, _ = self.sums
        return max(a + c * share, 0.25 * share * st / sb)

    def observe(self, share, seconds, confirm=None):
        """Feed one measurement; returns True when it confirmed a change of speed. `confirm`
        overrides the number of deviations needed (the policy lowers it while the ranks settle
        after a change, when a rank sharing a resource with the changed one moves too)."""
        if not self.fitted:
            self._add(share, seconds)
            return False
        error = seconds / self.predict(share) - 1.0
        limit = max(self.change_threshold, self.noise_multiplier * self.noise)
        if abs(error) <= limit:
            self.pending.clear()
            self._add(share, seconds)
            drifted = self._drifted(share, seconds, error)
            self.noise += (1.0 - self.forgetting) * (abs(error) - self.noise)
            return drifted
        if self.pending and math.copysign(1, error) != math.copysign(1, self.pending[-1][2]):
            self.pending.clear()
        self.pending.append((share, seconds, error))
        needed = self.confirm if confirm is None else confirm
        if len(self.pending) < needed:
            return False  # maybe an outlier: hold it back, keep the model
        self.confirm_pending()
        return True

    def _drifted(self, share, seconds, error):
        """A CUSUM of the errors in one direction; True once the run's excess over the slack
        reaches `change_threshold`, when the history before the run is rescaled to the run's
        level (the run's own observations, already in the fit, are at that level)."""
        direction = math.copysign(1, self.drifting[0][2] if self.drifting else error)
        self.drift = max(0.0, self.drift + direction * error - self.drift_slack * self.noise)
        if self.drift == 0.0:
            self.drifting.clear()
            return False
        self.drifting.append((share, seconds, error))
        if self.drift < self.change_threshold:
            return False
        self._rescale(self.drifting)
        return True

    def confirm_pending(self):
        """Take the deviations held back as a change after all: another rank's confirmed change
        explains them (a change of one rank moves the common slowdown the others are measured
        against)."""
        if self.pending:
            for share, seconds, _ in self.pending:
                self._add(share, seconds)
            self._rescale(self.pending)

    def _rescale(self, recent):
        """Take the change as a change of speed: slowing a rank (contention, throttling, a
        slower device) scales its overhead and its per-sample cost alike. Scaling the history
        before the `recent` observations that showed the change (already in the fit, newest
        last) keeps what it knew about the split between the two, so the very next split is
        balanced."""
        ratio = sum(1.0 + error for _, _, error in recent) / len(recent)
        known_t = known_bt = 0.0  # the recent observations' part of the weighted sums
        for age, (share, seconds, _) in enumerate(reversed(recent)):
            weight = self.forgetting**age
            known_t += weight * seconds
            known_bt += weight * share * seconds
        self.sums[3] = ratio * self.sums[3] - (ratio - 1.0) * known_t
        self.sums[4] = ratio * self.sums[4] - (ratio - 1.0) * known_bt
        self.pending, self.drifting, self.drift = [], [], 0.0

    def _add(self, share, seconds):
        keep = self.forgetting
        w, sb, sbb, st, sbt, squares = self.sums
        self.sums = [
            keep * w + 1.0,
            keep * sb + share,
            keep * sbb + share * share,
            keep * st + seconds,
            keep * sbt + share * seconds,
            keep * keep * squares + 1.0,
        ]


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
