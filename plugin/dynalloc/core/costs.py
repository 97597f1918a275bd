"""A rank's compute seconds as a function of its share: affine, or a measured table.

Both are nondecreasing in the share, which is what makes the min-max split exact
(`dynalloc.core.monotone`); both take an integer array of shares and return seconds, so a
simulated cluster of thousands of ranks evaluates one group of identical ranks in one call.
"""

import numpy as np


class AffineCost:
    """`intercept + slope * b`: a fixed cost per iteration (launches, Python, small-batch
    inefficiency) plus a cost per sample; what `dynalloc simulate --fit` measures."""

    def __init__(self, intercept, slope):
        self.intercept, self.slope = float(intercept), float(slope)

    def __call__(self, shares):
        return self.intercept + self.slope * np.asarray(shares, dtype=float)

    def spec(self):
        return {"intercept_s": self.intercept, "per_sample_s": self.slope}


class TableCost:
    """Seconds measured at a few shares, interpolated linearly between them and extended
    beyond them along the first and last segments (floored at 0): linear pieces keep the
    measurements' order, so nondecreasing measurements give a nondecreasing cost, which a
    smoother (cubic) interpolation would not guarantee."""

    def __init__(self, batches, seconds):
        """`batches`: the shares measured (integers); `seconds`: the time at each."""
        self.batches = np.asarray(batches, dtype=float)
        self.seconds = np.asarray(seconds, dtype=float)
        if len(self.batches) < 2:
            raise ValueError("needs at least two (batch, seconds) points")
        if np.any(np.diff(self.batches) <= 0):
            raise ValueError("batches must increase from point to point")
        if np.any(np.diff(self.seconds) < 0):
            raise ValueError("seconds must not decrease as the batch grows")
        self.first = (self.seconds[1] - self.seconds[0]) / (self.batches[1] - self.batches[0])
        self.last = (self.seconds[-1] - self.seconds[-2]) / (self.batches[-1] - self.batches[-2])

    def __call__(self, shares):
        b = np.asarray(shares, dtype=float)
        inside = np.interp(b, self.batches, self.seconds)
        below = self.seconds[0] + self.first * (b - self.batches[0])
        above = self.seconds[-1] + self.last * (b - self.batches[-1])
        out = np.where(b < self.batches[0], below, np.where(b > self.batches[-1], above, inside))
        return np.maximum(out, 0.0)

    def spec(self):
        return {
            "table": [[int(b), float(t)] for b, t in zip(self.batches, self.seconds, strict=True)]
        }
