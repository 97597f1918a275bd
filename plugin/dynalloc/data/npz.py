"""Reader of a NumPy .npz archive: the catch-all for any dataset already loaded into arrays
elsewhere (Keras downloads, exports of other tools), split by its keys or per class.
"""

import zipfile
import zlib

import numpy as np

from dynalloc.data.source import OWN_SPLIT, SourceData, dims, stratified_split
from dynalloc.errors import DynallocError

NPZ_SPLIT_KEYS = ("x_train", "y_train", "x_test", "y_test")
NPZ_WHOLE_KEYS = ("x", "y")


def read_npz(args, rng):
    """An .npz with x_train, y_train, x_test, y_test (its own split), or x, y (split per class).

    x is N x H x W or N x C x H x W, any real dtype; y holds non-negative integer labels.
    """
    path = args.path
    if not path.is_file():
        raise DynallocError(f"{path}: .npz file not found")
    arrays = _load_npz(path)
    if any(key in arrays for key in NPZ_SPLIT_KEYS):
        missing = [key for key in NPZ_SPLIT_KEYS if key not in arrays]
        if missing:
            raise DynallocError(f"{path}: has {', '.join(NPZ_SPLIT_KEYS)} except {missing}")
        train_x, train_y = _npz_pair(path, arrays, "x_train", "y_train")
        test_x, test_y = _npz_pair(path, arrays, "x_test", "y_test")
        if train_x.shape[1:] != test_x.shape[1:]:
            raise DynallocError(
                f"{path}: x_train images are {dims(train_x)} but x_test {dims(test_x)}"
            )
        split, details = (train_x, train_y, test_x, test_y), OWN_SPLIT
    elif all(key in arrays for key in NPZ_WHOLE_KEYS):
        x, y = _npz_pair(path, arrays, "x", "y")
        split, details = stratified_split(x, y, args.test_fraction, rng, str(path)), {}
    else:
        raise DynallocError(
            f"{path}: expected arrays {', '.join(NPZ_SPLIT_KEYS)} or x, y; "
            f"found {', '.join(arrays) or 'none'}"
        )
    classes = int(max(split[1].max(), split[3].max())) + 1
    return SourceData(*split, classes=classes, details={"origin": str(path), **details})


def _load_npz(path):
    """{name: array} of an .npz, every member read now so that corruption shows here."""
    try:
        archive = np.load(path, allow_pickle=False)
        if isinstance(archive, np.ndarray):
            raise DynallocError(f"{path}: a single .npy array, not an .npz archive")
        with archive:
            return {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise DynallocError(f"{path}: not a readable .npz archive ({problem})") from None


def _npz_pair(path, arrays, x_key, y_key):
    x, y = arrays[x_key], arrays[y_key]
    if x.dtype.kind not in "iuf" or x.ndim not in (3, 4):
        raise DynallocError(
            f"{path}: {x_key} must hold real N x H x W or N x C x H x W images, "
            f"found {x.dtype} of shape {x.shape}"
        )
    if x.ndim == 3:
        x = x[:, None]
    if y.ndim == 2 and y.shape[1] == 1:  # as Keras stores CIFAR labels
        y = y[:, 0]
    if y.dtype.kind not in "iu" or y.ndim != 1:
        raise DynallocError(
            f"{path}: {y_key} must hold N integer labels, found {y.dtype} of shape {y.shape}"
        )
    if len(y) != len(x):
        raise DynallocError(f"{path}: {y_key} has {len(y)} labels but {x_key} {len(x)} images")
    if len(x) == 0:
        raise DynallocError(f"{path}: {x_key} holds no images")
    if y.min() < 0:
        raise DynallocError(f"{path}: {y_key} holds label {y.min()}; labels start at 0")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise DynallocError(f"{path}: {x_key} holds NaN or infinite values")
    return x, y
