"""Each rank's affine cost `a + c b` of its share, fitted from the iterations a run recorded:
the numbers `dynalloc simulate --fit` models a run's machine with, and a warm start begins from.

The inputs are one row per rank per iteration, the first iteration (the framework's warm-up)
left out: the rank, its share, its own time (the busy time over the emulated slowdown the row ran
under) and whether the row is the rank's first computation of that share (a new share pays
MXNet's memory planning once: `new_shape`).
- A rank's level: its mean time over its mean share, on the rows of shares it had seen before.
- The split of that level into intercept and per-sample cost: one intercept fraction for all
  ranks, by least squares over every rank's times against its shares, each over its means. Why
  one: a rank's own shares move too little to tell its intercept from its slope (slopes of 0.1
  to 5 ms a sample were fitted to one LeNet on the bench's adaptive runs), while the emulated
  slowdowns and a kind of node scale a rank's whole cost. A run that never moved its shares has
  only the epochs' smaller last batches to tell the fraction, most of them new shapes, divided
  by 1 + DEFAULT_NEW_SHAPE.
- `new_shape`: the median excess of a rank's first computation of a share over the fit (runs
  that move shares); DEFAULT_NEW_SHAPE otherwise.
- Noise: the spread of the log residuals once each iteration's mean over the ranks is removed:
  a slowdown all ranks share makes no rank wait and moves no policy, so only what differs
  between ranks is modelled.
"""

import numpy as np

# LeNet's new share on one CPU core costs 4-11% more than a share seen before
# (benchmarks/new_shape.py); used when a run shows no new share outside its last batches.
DEFAULT_NEW_SHAPE = 0.07
MIN_NEW_ROWS = 4  # first computations of a share needed to measure new_shape from a run
# The spread of the shares seen before (over each rank's mean) from which they tell the intercept
# from the per-sample cost; below it, only the epochs' last batches differ.
MIN_SPREAD = 0.05


def first_computations(rank, share):
    """Whether each row (in the order of the run) is its rank's first computation of its share."""
    pairs = np.stack([rank, share], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    new = np.zeros(len(rank), dtype=bool)
    new[first] = True
    return new


def fit_costs(rank, share, own, new, ranks):
    """(a, c, new_shape): each rank's intercept and per-sample seconds, and the fraction a new
    share costs once. Every rank must have a row at a share it had computed before."""
    seen = ~new
    counts = np.bincount(rank[seen], minlength=ranks)
    if np.any(counts == 0):
        raise ValueError("a rank has no iteration at a share it computed before: nothing to fit")
    mean_share = np.bincount(rank[seen], share[seen], ranks) / counts
    level = np.bincount(rank[seen], own[seen], ranks) / counts
    x = share / mean_share[rank]  # share and time over the rank's means
    y = own / level[rank]
    moved = seen.sum() > 1 and float(np.std(x[seen], ddof=1)) >= MIN_SPREAD
    new_shape = DEFAULT_NEW_SHAPE
    if moved:  # the shares the ranks had seen before tell the fraction; the new ones, new_shape
        fraction = _fraction(x[seen], y[seen])
        if new.sum() >= MIN_NEW_ROWS:
            excess = y[new] / (fraction + (1 - fraction) * x[new])
            new_shape = max(float(np.median(excess)) - 1.0, 0.0)
    else:  # only the epochs' last batches differ, most of them new shapes
        fraction = _fraction(x, y / (1 + DEFAULT_NEW_SHAPE * new))
    return fraction * level, (1 - fraction) * level / mean_share, new_shape


def _fraction(x, y):
    """The intercept fraction f of y = f + (1 - f) x by least squares (x, y: share and time
    over their means), within [0, 0.9]; 0 where the shares never differ."""
    lever = 1.0 - x
    spread = float((lever**2).sum())
    if spread == 0.0:
        return 0.0
    return float(np.clip(((y - x) * lever).sum() / spread, 0.0, 0.9))


def fit_noise(iteration, rank, share, own, new, a, c):
    """Relative standard deviation of what differs between the ranks within an iteration (NaN
    where no iteration has two ranks' rows of shares seen before)."""
    seen = ~new
    iteration, rank, share, own = iteration[seen], rank[seen], share[seen], own[seen]
    residual = np.log(own / (a[rank] + c[rank] * share))
    _, group, count = np.unique(iteration, return_inverse=True, return_counts=True)
    centred = residual - (np.bincount(group, residual) / count)[group]
    ranks = count[group]
    usable = ranks > 1
    if not usable.any():
        return float("nan")
    variance = float(np.mean(centred[usable] ** 2 * ranks[usable] / (ranks[usable] - 1)))
    return float(np.sqrt(np.expm1(variance)))
