"""What a dataset reader hands `dynalloc stage`, and the helpers several readers share.

Readers live in one module per format; this module is the contract between them and the
command, so that a reader depends on it and never on the command or on another reader.
"""

from typing import NamedTuple

import numpy as np

from dynalloc.errors import DynallocError

# For sources that come split: no fraction was applied, and the manifest should not claim one.
OWN_SPLIT = {"split": "the files' own", "test_fraction": None}


class SourceData(NamedTuple):
    train_x: np.ndarray  # (N, C, H, W), any real dtype: staging normalises it
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    details: dict  # recorded in the manifest, e.g. where the data came from


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


def existing_dir(path, what):
    if not path.is_dir():
        raise DynallocError(f"{path}: not a directory (--path names the directory of the {what})")
    return path


def read_bytes(path):
    try:
        return path.read_bytes()
    except OSError as error:
        raise DynallocError(f"{path}: cannot read ({error.strerror or error})") from None


def dims(x):
    return "x".join(map(str, x.shape[1:]))
