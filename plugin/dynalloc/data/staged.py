"""A staged dataset: four .npy files the ranks memory-map, and a manifest that vouches for them.

Staging writes it once (`write_staged`); every training run checks it before its first
iteration (`load_staged`), so a truncated copy, a stale manifest or a corrupted byte stops the
run with one line naming the file instead of training on garbage.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np

from dynalloc import __version__
from dynalloc.data.blocks import check_finite, check_labels, mean_std, normalised
from dynalloc.data.stagedir import (
    MANIFEST_NAME,
    file_sha256,
    save_array,
    staging_directory,
    write_manifest,
)
from dynalloc.errors import DynallocError

FORMAT_VERSION = 1
SPLITS = ("train", "test")
DATA_FILES = tuple(f"{split}_{part}.npy" for split in SPLITS for part in ("x", "y"))
MANIFEST_KEYS = ("format_version", "source", "classes", "input_shape", "splits", "sha256")
SPLIT_KEYS = ("n", "x_shape", "x_dtype", "y_dtype")
X_DTYPE = np.dtype(np.float32)
Y_DTYPE = np.dtype(np.int32)


@dataclasses.dataclass(frozen=True, eq=False)
class StagedDataset:
    """The arrays are read-only memory maps: each rank pages in only the rows it trains on."""

    path: Path
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    input_shape: tuple
    manifest: dict

    @property
    def train_size(self):
        return len(self.train_y)

    @property
    def test_size(self):
        return len(self.test_y)


def load_staged(path, verify=True):
    """Open a staged dataset after checking it against its manifest.

    Shapes, dtypes and counts are always checked: they cost nothing. `verify` adds the checks
    that read every byte (sha256 of each file, labels within [0, classes), finite pixels), which
    one process per node can do while the others skip them.
    """
    path = Path(path)
    if not path.is_dir():
        raise DynallocError(f"{path}: staged dataset directory not found")
    manifest = _read_manifest(path / MANIFEST_NAME)
    for name in DATA_FILES:
        if not (path / name).is_file():
            raise DynallocError(f"{path / name}: data file missing (listed in {MANIFEST_NAME})")
    if verify:
        for name in DATA_FILES:
            if file_sha256(path / name) != manifest["sha256"][name]:
                raise DynallocError(
                    f"{path / name}: sha256 differs from {MANIFEST_NAME}: the file is corrupted"
                )
    arrays = {name: _open_array(path / name) for name in DATA_FILES}
    for split in SPLITS:
        x_path, y_path = path / f"{split}_x.npy", path / f"{split}_y.npy"
        x, y = arrays[x_path.name], arrays[y_path.name]
        _check_pair(str(x_path), x, str(y_path), y)
        expected = manifest["splits"][split]
        if list(x.shape) != expected["x_shape"] or x.dtype != np.dtype(expected["x_dtype"]):
            raise DynallocError(
                f"{x_path}: shape {list(x.shape)} dtype {x.dtype}, but {MANIFEST_NAME} says "
                f"shape {expected['x_shape']} dtype {expected['x_dtype']}"
            )
        if y.dtype != np.dtype(expected["y_dtype"]):
            raise DynallocError(
                f"{y_path}: dtype {y.dtype}, but {MANIFEST_NAME} says {expected['y_dtype']}"
            )
        if verify:
            check_labels(str(y_path), y, manifest["classes"])
            check_finite(str(x_path), x)
    return StagedDataset(
        path=path,
        train_x=arrays["train_x.npy"],
        train_y=arrays["train_y.npy"],
        test_x=arrays["test_x.npy"],
        test_y=arrays["test_y.npy"],
        classes=manifest["classes"],
        input_shape=tuple(manifest["input_shape"]),
        manifest=manifest,
    )


def write_staged(out_dir, train_x, train_y, test_x, test_y, *, source, classes, extra=None):
    """Normalise and write a staged dataset so that `out_dir` ends up either complete or untouched.

    x arrays are (N, C, H, W). They are shifted and scaled by the mean and std of the train split
    alone, so nothing about the test images leaks into training. Everything goes into a temporary
    sibling directory, manifest last, which is then renamed to `out_dir`; an existing staged
    dataset there is replaced.
    """
    out_dir = Path(out_dir)
    splits = {"train": (train_x, train_y), "test": (test_x, test_y)}
    for split, (x, y) in splits.items():
        _check_pair(f"{source} {split}_x", x, f"{source} {split}_y", y)
        check_labels(f"{source} {split}_y", y, classes)
        check_finite(f"{source} {split}_x", x)
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DynallocError(
            f"{source}: train images are {train_x.shape[1:]} but test images {test_x.shape[1:]}"
        )
    mean, std = mean_std(train_x)
    if not std > 0:
        raise DynallocError(f"{source} train_x: every pixel has the same value; cannot normalise")
    manifest = {
        "format_version": FORMAT_VERSION,
        "source": source,
        "classes": int(classes),
        "input_shape": list(train_x.shape[1:]),
        "splits": {},
        "normalisation": {"mean": mean, "std": std, "computed_on": "train"},
        "sha256": {},
        "dynalloc_version": __version__,
    }
    clashes = sorted(set(manifest) & set(extra or {}))
    if clashes:
        raise ValueError(f"extra manifest keys clash with the format's own: {clashes}")
    manifest.update(extra or {})
    with staging_directory(out_dir) as tmp_dir:
        for split, (x, y) in splits.items():
            save_array(tmp_dir, f"{split}_x.npy", normalised(x, mean, std, X_DTYPE), manifest)
            save_array(tmp_dir, f"{split}_y.npy", np.ascontiguousarray(y, Y_DTYPE), manifest)
            manifest["splits"][split] = {
                "n": len(y),
                "x_shape": list(x.shape),
                "x_dtype": X_DTYPE.name,
                "y_dtype": Y_DTYPE.name,
            }
        write_manifest(tmp_dir, manifest)
    return out_dir


def _read_manifest(path):
    if not path.is_file():
        raise DynallocError(f"{path}: manifest missing; stage the dataset again")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DynallocError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise DynallocError(f"{path}: expected a JSON object, found {type(manifest).__name__}")
    _require_keys(path, manifest, MANIFEST_KEYS, "")
    if manifest["format_version"] != FORMAT_VERSION:
        raise DynallocError(
            f"{path}: format_version {manifest['format_version']!r} is not {FORMAT_VERSION}"
        )
    classes, input_shape = manifest["classes"], manifest["input_shape"]
    if not _is_positive_int(classes):
        raise DynallocError(f"{path}: classes must be a positive integer, not {classes!r}")
    if not (
        isinstance(input_shape, list)
        and len(input_shape) == 3
        and all(map(_is_positive_int, input_shape))
    ):
        raise DynallocError(f"{path}: input_shape must be [C, H, W], not {input_shape!r}")
    _require_keys(path, manifest["splits"], SPLITS, "splits.")
    for split in SPLITS:
        entry = manifest["splits"][split]
        _require_keys(path, entry, SPLIT_KEYS, f"splits.{split}.")
        if entry["x_shape"] != [entry["n"], *input_shape]:
            raise DynallocError(
                f"{path}: splits.{split}.x_shape {entry['x_shape']!r} is not "
                f"[n, *input_shape] = {[entry['n'], *input_shape]}"
            )
        for key in ("x_dtype", "y_dtype"):
            try:
                np.dtype(entry[key])
            except TypeError:
                raise DynallocError(
                    f"{path}: splits.{split}.{key} {entry[key]!r} is not a dtype"
                ) from None
    _require_keys(path, manifest["sha256"], DATA_FILES, "sha256.")
    return manifest


def _require_keys(path, mapping, keys, prefix):
    if not isinstance(mapping, dict):
        raise DynallocError(f"{path}: {prefix.rstrip('.')} must be a JSON object")
    missing = [prefix + key for key in keys if key not in mapping]
    if missing:
        raise DynallocError(f"{path}: missing key(s) {', '.join(missing)}")


def _is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _open_array(path):
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError) as error:
        raise DynallocError(f"{path}: not a readable .npy file ({error})") from None


def _check_pair(x_name, x, y_name, y):
    """The structure every split needs: (N, C, H, W) real-valued images, N integer labels."""
    if x.ndim != 4 or not (
        np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
    ):
        raise DynallocError(
            f"{x_name}: expected real (N, C, H, W) images, found {x.dtype} of shape {x.shape}"
        )
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise DynallocError(f"{y_name}: expected N integer labels, found {y.dtype} {y.shape}")
    if len(y) != len(x):
        raise DynallocError(f"{y_name}: {len(y)} labels but {x_name} has {len(x)} images")
    if len(x) == 0:
        raise DynallocError(f"{x_name}: no images")
