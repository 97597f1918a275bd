"""Online affine cost models of the ranks, `t = a + c * b`, with forgetting and a change detector.

Why affine: Python, kernel launches and small-batch inefficiency cost a fixed `a` per iteration,
so time is not proportional to the share; a rule that assumes it is over-corrects when shares get
small. Why a prior: while the shares stay put, the data cannot separate `a` from `c`, so a weak
prior on the intercept's fraction of the time settles that direction (at a fixed point any split
that fits the observation predicts the same time, so the prior costs nothing there). Why a change
detector: exponential forgetting alone takes many iterations to follow a rank that suddenly runs
three times slower; a confirmed change instead rescales the model at once. A change too small
to stand out of the noise in one look (a rank that gets more of a shared core as its neighbour
slows) is confirmed by a cumulative sum (CUSUM) of the errors beyond the noise: a one-sided run
that keeps coming adds up where each deviation alone would be noise. Why arrays: every rank
updates every rank's model after every iteration, on the critical path; one model object per rank
cost 89 ms an update at 4,096 ranks, arrays a few array passes. Each element follows the
arithmetic a scalar model would, operation for operation, so the shares come out the same to
the last bit (Python's `x ** 0.5` and NumPy's differ in the last bit: see `uncertainty`).
"""

import contextlib

import numpy as np

from dynalloc.core.runs import Runs

SEED_OBSERVATIONS = 4  # what a warm start's costs weigh in a fit, in iterations' data


class AffineCostModels:
    """Exponentially weighted ridge fits of `t = a + c*b`, one per rank, as arrays.

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

    def __init__(
        self, ranks, forgetting=0.95, intercept_fraction=0.1, prior_strength=0.05,
        change_threshold=0.25, noise_multiplier=4.0, confirm=2, drift_slack=2.0,
    ):  # fmt: skip
        self.forgetting, self.intercept_fraction = forgetting, intercept_fraction
        self.prior_strength, self.change_threshold = prior_strength, change_threshold
        self.noise_multiplier, self.confirm, self.drift_slack = (
            noise_multiplier,
            confirm,
            drift_slack,
        )
        self.noise = np.full(ranks, 0.05)  # exponentially weighted mean absolute relative error
        self.sums = np.zeros((6, ranks))  # W, Sb, Sbb, St, Sbt, sum of w^2 of each rank
        self.pending = Runs(ranks)  # unconfirmed deviating observations
        self.drifting = Runs(ranks)  # the CUSUM run's observations
        self.drift = np.zeros(ranks)  # the run's summed excess over the slack
        self._complete = False  # see `complete`
        # What each sum keeps of its past per observation (the weights' squares: the square).
        self.keep = np.array([[forgetting]] * 5 + [[forgetting * forgetting]], dtype=float)

    @property
    def fitted(self):
        return self.sums[0] > 0

    @property
    def complete(self):
        """Whether every rank has had an observation (for good, once true)."""
        if not self._complete:
            self._complete = bool(self.fitted.all())
        return self._complete

    def coefficients(self):
        """(a, c) of each rank's current fit (NaN where a rank has no observation yet)."""
        with self._quiet():
            return self._fit()

    def _quiet(self):
        """Silence the 0 / 0 of ranks without observations, while there are any (NumPy's
        error state costs as much as the fit itself on a few ranks)."""
        if self.complete:
            return contextlib.nullcontext()
        return np.errstate(divide="ignore", invalid="ignore")

    def _fit(self):
        w, sb, sbb, st, sbt, _ = self.sums
        mean_b, mean_t = sb / w, st / w
        prior_a = self.intercept_fraction * mean_t
        rho = self.prior_strength * w
        # Normal equations of sum w (t - a - c b)^2 + rho (a - prior_a)^2.
        m11, m12, m22 = w + rho, sb, sbb
        r1, r2 = st + rho * prior_a, sbt
        det = m11 * m22 - m12 * m12
        a = np.divide(r1 * m22 - m12 * r2, det, out=prior_a, where=det > 0)
        # A local fit: a negative intercept is how a superlinear cost looks near the data.
        a = np.minimum(np.maximum(a, -0.5 * mean_t), 0.95 * mean_t)
        c = (mean_t - a) / mean_b
        return a, c

    def uncertainty(self):
        """Relative standard error of each fitted level: the noise over the effective sample
        count. A move smaller than this is as likely to chase noise as to help."""
        w, squares = self.sums[0], self.sums[5]
        # Python's `x ** 0.5` (the C library's pow), not NumPy's square root or power, which
        # differ from it in the last bit: `squares` follows only the count of observations, the
        # same on most ranks, so this is one or two Python powers.
        if squares.min() == squares.max():
            roots = float(squares[0]) ** 0.5
        else:
            values, inverse = np.unique(squares, return_inverse=True)
            roots = np.array([value**0.5 for value in values.tolist()])[inverse]
        return 1.25 * self.noise * roots / w  # 1.25: mean absolute error -> std

    def seed(self, intercepts, slopes, shares, noise=None):
        """Start each rank's fit from a known cost `a + c b`: SEED_OBSERVATIONS exact
        observations on either side of its share (two shares tell `a` from `c`), weighing what
        that many iterations would; `noise` replaces the default usual error."""
        for share in (np.maximum(0.5 * shares, 1.0), np.maximum(1.5 * shares, 2.0)):
            for _ in range(SEED_OBSERVATIONS // 2):
                self._add(np.ones(len(shares), dtype=bool), share, intercepts + slopes * share)
        if noise is not None and np.isfinite(noise):
            self.noise[:] = max(noise, 1e-3)

    def predict(self, shares):
        """Each rank's predicted seconds for its share."""
        _, sb, _, st, _, _ = self.sums
        with self._quiet():
            a, c = self._fit()
            # Far below the data, a negative local intercept would predict a negative time,
            # and a change detected against it would rescale the history by a negative ratio.
            return np.maximum(a + c * shares, 0.25 * shares * st / sb)

    def observe(self, shares, seconds, predicted, needed):
        """Feed each rank with a share its measurement; returns which ranks confirmed a change
        of speed. `predicted`: `predict(shares)`, which the policy has asked for already.
        `needed`: the deviations in a row that confirm a change, for all ranks or per rank (the
        policy lowers it while the ranks settle after a change, when a rank sharing a resource
        with the changed one moves too)."""
        share = shares.astype(float)
        known = shares > 0
        if not self.complete:
            fitted = self.fitted
            self._add(known & ~fitted, share, seconds)  # a first observation starts the fit
            known &= fitted
        error = np.divide(seconds, predicted, out=np.zeros_like(share), where=known) - 1.0
        size = np.abs(error)
        usual = known & (size <= np.maximum(self.noise_multiplier * self.noise,
                                            self.change_threshold))  # fmt: skip
        self.pending.clear(usual)
        self._add(usual, share, seconds)
        drifted = self._drifted(usual, share, seconds, error)
        np.add(
            self.noise, (1.0 - self.forgetting) * (size - self.noise), out=self.noise, where=usual
        )
        deviating = known & ~usual  # maybe an outlier: held back until enough come in a row
        if not deviating.any():
            return drifted
        turned = np.copysign(1.0, error) != np.copysign(1.0, self.pending.last_error())
        self.pending.clear(deviating & (self.pending.length > 0) & turned)
        self.pending.append(deviating, share, seconds, error)
        confirmed = deviating & (self.pending.length >= needed)
        self._confirm(confirmed)
        return drifted | confirmed

    def _drifted(self, mask, share, seconds, error):
        """A CUSUM of each rank's errors in one direction; True once the run's excess over the
        slack reaches `change_threshold`, when the history before the run is rescaled to the
        run's level (the run's own observations, already in the fit, are at that level)."""
        started = np.where(self.drifting.length > 0, self.drifting.first_error(), error)
        excess = self.drift + np.copysign(1.0, started) * error - self.drift_slack * self.noise
        np.maximum(excess, 0.0, out=self.drift, where=mask)
        ended = self.drift == 0.0
        self.drifting.clear(mask & ended)
        running = mask & ~ended
        self.drifting.append(running, share, seconds, error)
        reached = running & (self.drift >= self.change_threshold)
        self._rescale(reached, self.drifting)
        return reached

    def confirm_pending(self):
        """Take every rank's deviations held back as a change after all: another rank's
        confirmed change explains them (a change of one rank moves the common slowdown the
        others are measured against)."""
        self._confirm(np.ones(len(self.drift), dtype=bool))

    def _confirm(self, mask):
        held = mask & (self.pending.length > 0)
        if not held.any():
            return
        for j in range(int(self.pending.length[held].max())):
            self._add(held & (self.pending.length > j), self.pending.share[:, j],
                      self.pending.seconds[:, j])  # fmt: skip
        self._rescale(held, self.pending)

    def _rescale(self, mask, recent):
        """Take the change as a change of speed: slowing a rank (contention, throttling, a
        slower device) scales its overhead and its per-sample cost alike. Scaling the history
        before the `recent` observations that showed the change (already in the fit, newest
        last) keeps what it knew about the split between the two, so the very next split is
        balanced. Changes are rare: this loops over the length of the runs."""
        if not mask.any():
            return
        rows = np.flatnonzero(mask)
        length = recent.length[rows]
        total = np.zeros(rows.size)  # summed in arrival order, as `sum` would
        for j in range(int(length.max())):
            live = length > j
            total[live] += 1.0 + recent.error[rows[live], j]
        ratio = total / length
        known_t, known_bt = np.zeros(rows.size), np.zeros(rows.size)  # the run's part of the sums
        for age in range(int(length.max())):
            live = length > age
            weight = self.forgetting**age
            at = rows[live], length[live] - 1 - age  # newest first
            known_t[live] += weight * recent.seconds[at]
            known_bt[live] += weight * recent.share[at] * recent.seconds[at]
        self.sums[3, rows] = ratio * self.sums[3, rows] - (ratio - 1.0) * known_t
        self.sums[4, rows] = ratio * self.sums[4, rows] - (ratio - 1.0) * known_bt
        self.pending.clear(mask)
        self.drifting.clear(mask)
        self.drift[mask] = 0.0

    def _add(self, mask, share, seconds):
        """Add each masked rank's observation to its sums (the others' numbers are ignored)."""
        if not mask.any():
            return
        ones = np.ones(len(share))
        added = np.array([ones, share, share * share, seconds, share * seconds, ones])
        np.add(self.sums * self.keep, added, out=self.sums, where=mask)


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
