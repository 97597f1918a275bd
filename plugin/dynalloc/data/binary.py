"""Readers of the fixed binary layouts the classic datasets are published in: IDX files (MNIST,
Fashion-MNIST, KMNIST) and the CIFAR-10 binary batches. Both come with their own train/test
split, and both are read byte by byte so that a damaged file is named with its fault.
"""

import gzip
import struct
import zlib

import numpy as np

from dynalloc.data.source import OWN_SPLIT, SourceData, dims, existing_dir, read_bytes
from dynalloc.errors import DynallocError

# IDX (the MNIST format, also Fashion-MNIST and KMNIST): big-endian magic 0x0000TTDD, T the
# element type (0x08 = uint8), D the number of dimensions, then D big-endian uint32 sizes.
IDX_IMAGES_MAGIC = 0x00000803  # uint8, N x H x W
IDX_LABELS_MAGIC = 0x00000801  # uint8, N
IDX_NAMES = {  # (split, part) -> the usual name; '.idx' for '-idx' and '.gz' are accepted too
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
GZIP_MAGIC = b"\x1f\x8b"

# CIFAR-10 binary version: records of one label byte and 3 x 32 x 32 pixel bytes (R, G, B planes).
CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR10_TEST_FILE = "test_batch.bin"
CIFAR10_SHAPE = (3, 32, 32)
CIFAR10_RECORD = 1 + 3 * 32 * 32
CIFAR10_CLASSES = 10


def read_idx(args, rng):
    """A directory of MNIST-format IDX files (MNIST, Fashion-MNIST, KMNIST), gzipped or raw.

    Uses the files' own train/test split and keeps their order. Read directly: MXNet's
    FashionMNIST class rejects Debian's recompressed files and tries to download.
    """
    directory = existing_dir(args.path, "IDX files")
    found, splits = {}, {}
    for split in ("train", "test"):
        images_path = _find_idx_file(directory, IDX_NAMES[split, "images"])
        labels_path = _find_idx_file(directory, IDX_NAMES[split, "labels"])
        images = _read_idx_file(images_path, IDX_IMAGES_MAGIC, "uint8 images of N x H x W")
        labels = _read_idx_file(labels_path, IDX_LABELS_MAGIC, "uint8 labels")
        if len(labels) != len(images):
            raise DynallocError(
                f"{labels_path}: {len(labels)} labels, but {images_path.name} has "
                f"{len(images)} images"
            )
        if len(images) == 0:
            raise DynallocError(f"{images_path}: holds no images")
        splits[split] = (images[:, None], labels)
        found[f"{split}_images"], found[f"{split}_labels"] = images_path.name, labels_path.name
    (train_x, train_y), (test_x, test_y) = splits["train"], splits["test"]
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DynallocError(
            f"{directory}: train images are {dims(train_x)} but test images {dims(test_x)}"
        )
    return SourceData(
        train_x,
        train_y,
        test_x,
        test_y,
        classes=int(max(train_y.max(), test_y.max())) + 1,
        details={"origin": str(directory), "files": found, **OWN_SPLIT},
    )


def _find_idx_file(directory, name):
    dotted = name.replace("-idx", ".idx")
    candidates = (name, f"{name}.gz", dotted, f"{dotted}.gz")
    for candidate in candidates:
        if (directory / candidate).is_file():
            return directory / candidate
    raise DynallocError(
        f"{directory / name}: missing (also looked for {', '.join(candidates[1:])})"
    )


def _read_idx_file(path, magic, what):
    """The array of one IDX file whose header must carry `magic`; gzip is recognised by content."""
    data = read_bytes(path)
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise DynallocError(f"{path}: truncated gzip stream") from None
        except (OSError, zlib.error) as error:
            raise DynallocError(f"{path}: corrupt gzip data ({error})") from None
    if len(data) < 4:
        raise DynallocError(f"{path}: {len(data)} bytes, too short for an IDX header")
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise DynallocError(f"{path}: magic 0x{found:08x}, expected 0x{magic:08x} ({what})")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DynallocError(f"{path}: truncated IDX header ({len(data)} of {header} bytes)")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    promised = int(np.prod(dims, dtype=np.int64))
    body = len(data) - header
    if body != promised:
        problem = "truncated" if body < promised else "longer than its header says"
        raise DynallocError(
            f"{path}: {problem}: the header promises {' x '.join(map(str, dims))} = {promised} "
            f"bytes of data, the file holds {body}"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def read_cifar10(args, rng):
    """The CIFAR-10 binary version: data_batch_1..5.bin for train, test_batch.bin for test."""
    directory = existing_dir(args.path, "CIFAR-10 binary batches")
    for name in (*CIFAR10_TRAIN_FILES, CIFAR10_TEST_FILE):
        if not (directory / name).is_file():
            raise DynallocError(f"{directory / name}: missing (CIFAR-10 needs all six batches)")
    train = [_read_cifar10_batch(directory / name) for name in CIFAR10_TRAIN_FILES]
    test_x, test_y = _read_cifar10_batch(directory / CIFAR10_TEST_FILE)
    return SourceData(
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        test_x,
        test_y,
        classes=CIFAR10_CLASSES,
        details={"origin": str(directory), **OWN_SPLIT},
    )


def _read_cifar10_batch(path):
    data = read_bytes(path)
    if len(data) == 0:
        raise DynallocError(f"{path}: empty")
    if len(data) % CIFAR10_RECORD:
        raise DynallocError(
            f"{path}: truncated: {len(data)} bytes is not a whole number of "
            f"{CIFAR10_RECORD}-byte records (label + 3 x 32 x 32 pixels)"
        )
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, CIFAR10_RECORD)
    labels = records[:, 0]
    bad = np.flatnonzero(labels >= CIFAR10_CLASSES)
    if len(bad):
        raise DynallocError(
            f"{path}: record {bad[0]} has label {labels[bad[0]]}; CIFAR-10 labels are 0..9"
        )
    return records[:, 1:].reshape(-1, *CIFAR10_SHAPE), labels
