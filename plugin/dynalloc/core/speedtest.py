"""Whether ranks held at one split run at different speeds: an F-test on their per-sample times.

Under pure per-iteration jitter every rank draws from the same range and the equal split it
starts from is the best there is: a policy that re-divides on its first noisy times chases the
draw, and pays for it in imbalance and in new input shapes. So `adaptive` leaves the split it
starts from only once the times measured there reject equal speeds (or a rank's time doubles).
The test is the two-way analysis of variance of log per-sample time with the iterations as
blocks, so a slowdown that every rank shares (an OS hiccup, the machine's drift) drops out; a
weak prior on the residual variance keeps two near-identical iterations from passing for
certainty.

>>> test = EqualSpeedTest(2)
>>> for i in range(6):
...     test.observe([1e-3 * (1 + 0.02 * (-1) ** i), 1.3e-3])
>>> test.p_value() < 1e-3
True
"""

import math

import numpy as np

PRIOR_NOISE = 0.05  # residual sd of log per-sample time assumed before any is measured
PRIOR_DF = 2  # the prior's weight, in degrees of freedom of the residual variance
# P(F > 1) at its least, one and infinitely many degrees of freedom: P(|Z| > 1) = 0.31731...
SURVIVAL_AT_ONE = 0.3173


class EqualSpeedTest:
    """Sufficient statistics of the log per-sample times observed at one split."""

    def __init__(self, ranks):
        self.ranks = ranks
        self.count = 0
        self.sums = np.zeros(ranks)  # per rank: sum of centred log per-sample time
        self.squares = 0.0  # sum over ranks and iterations of its square

    def observe(self, per_sample):
        """One iteration's seconds per sample of every rank (all positive)."""
        logs = np.log(np.asarray(per_sample, dtype=float))
        logs -= logs.sum() / self.ranks  # the iteration's block effect (np.mean's number)
        self.count += 1
        self.sums += logs
        self.squares += float(logs @ logs)

    def p_value(self):
        """Probability of rank differences at least this large were the speeds equal."""
        statistic, d1, d2 = self._statistic()
        return f_survival(statistic, d1, d2)

    def differs(self, significance):
        """`p_value() < significance`, without the tail's continued fraction where the
        statistic is at most 1 (under equal speeds, about every other iteration): F exceeds 1
        with probability at least `SURVIVAL_AT_ONE` at any degrees of freedom."""
        statistic, d1, d2 = self._statistic()
        if statistic <= 1.0 and significance <= SURVIVAL_AT_ONE:
            return False
        return f_survival(statistic, d1, d2) < significance

    def _statistic(self):
        """The F statistic and its degrees of freedom (statistic 0 before two ranks' data)."""
        n, ranks = self.count, self.ranks
        if n == 0 or ranks < 2:
            return 0.0, 1, 1
        means = self.sums / n
        between = n * float(means @ means)
        df_between, df_residual = ranks - 1, (ranks - 1) * (n - 1) + PRIOR_DF
        residual = max(self.squares - between, 0.0) + PRIOR_DF * PRIOR_NOISE**2
        return (between / df_between) / (residual / df_residual), df_between, df_residual


def f_survival(statistic, d1, d2):
    """P(F > statistic) for Fisher's F with (d1, d2) degrees of freedom."""
    if statistic <= 0:
        return 1.0
    return regularized_beta(d2 / (d2 + d1 * statistic), d2 / 2, d1 / 2)


def regularized_beta(x, a, b):
    """I_x(a, b), the regularized incomplete beta function (continued fraction, Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x, a, b, steps=300, tolerance=1e-13):
    tiny = 1e-300

    def guard(value):
        return value if abs(value) > tiny else tiny

    c, d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1))
    fraction = d
    for m in range(1, steps):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 / guard(1.0 + numerator * d)
            c = guard(1.0 + numerator / c)
            fraction *= c * d
        if abs(c * d - 1.0) < tolerance:
            break
    return fraction
