"""Passes over a whole dataset block by block (sized for float64 temporaries), so that a 200 MB
file needs tens of MB of memory, not several copies of itself: the checks and the normalisation
of staging and verification."""

import numpy as np

from dynalloc.errors import DynallocError

SCAN_BLOCK_BYTES = 1 << 24


def row_blocks(array):
    """(first row, rows) pairs covering `array` in blocks of about SCAN_BLOCK_BYTES as float64."""
    row_bytes = 8 * max(1, int(np.prod(array.shape[1:])))
    rows = max(1, SCAN_BLOCK_BYTES // row_bytes)
    for start in range(0, len(array), rows):
        yield start, array[start : start + rows]


def check_labels(name, y, classes):
    """DynallocError naming the first label outside [0, classes)."""
    for _, block in row_blocks(y):
        low, high = int(block.min()), int(block.max())
        if low < 0 or high >= classes:
            bad = low if low < 0 else high
            raise DynallocError(f"{name}: label {bad} outside [0, {classes})")


def check_finite(name, x):
    """DynallocError naming the first image holding NaN or an infinite value."""
    for start, block in row_blocks(x):
        finite = np.isfinite(block)
        if not finite.all():
            row = int(np.argwhere(~finite)[0][0])
            kind = "NaN" if np.isnan(block[row]).any() else "infinite value"
            raise DynallocError(f"{name}: {kind} in the data (image {start + row})")


def mean_std(x):
    """Scalar mean and std over all pixels, accumulated in float64 one block at a time."""
    total = sum(float(np.sum(block, dtype=np.float64)) for _, block in row_blocks(x))
    mean = total / x.size
    squares = sum(
        float(np.sum(np.square(block.astype(np.float64) - mean))) for _, block in row_blocks(x)
    )
    return mean, (squares / x.size) ** 0.5


def normalised(x, mean, std, dtype):
    """`(x - mean) / std` as `dtype`, computed in float64 one block at a time."""
    out = np.empty(x.shape, dtype=dtype)
    for start, block in row_blocks(x):
        out[start : start + len(block)] = (block.astype(np.float64) - mean) / std
    return out
