"""`dynalloc stage`: turn a dataset already on disk (or a generated one) into a staged dataset.

No source downloads anything, so staging works on nodes without network, and the same seed
gives the same bytes. A source is one small reader in `SOURCES`; adding one adds a choice.
Built-in sources (mnist5k, digits, synthetic) need no files; the others read the files that
`--path` names (IDX files, the CIFAR-10 binary batches, an MXNet RecordIO pair, an image folder,
an .npz), and each reader turns a damaged or foreign file into one line naming the file and the
fault. `recordio` and `images` are streamed (`stage_stream`): staging indexes them where they
lie and the ranks read their own images from there; `--in-memory` decodes a RecordIO of images
of one size into arrays instead, as the other sources are staged.

This module is the command only; the readers live one format to a module (builtin, binary,
recordio, npz) behind the contract in `source`, so that the registry below is the one place
that lists them.
"""

from pathlib import Path

import numpy as np

from dynalloc.data.binary import read_cifar10, read_idx
from dynalloc.data.builtin import read_digits, read_mnist5k, read_synthetic
from dynalloc.data.npz import read_npz
from dynalloc.data.recordio import read_recordio
from dynalloc.data.source import dims
from dynalloc.data.stage_stream import stage_streamed
from dynalloc.data.staged import write_staged
from dynalloc.errors import DynallocError

# Sources that read files name them with --path, and what --path must be for each.
PATH_SOURCES = {
    "idx": "the directory of the IDX files",
    "cifar10": "the directory of the CIFAR-10 binary batches",
    "recordio": "the .rec file (its .idx beside it)",
    "images": "the folder of class folders",
    "npz": "the .npz file",
}
STREAMED = ("recordio", "images")

SOURCES = {
    "mnist5k": read_mnist5k,
    "digits": read_digits,
    "synthetic": read_synthetic,
    "idx": read_idx,
    "cifar10": read_cifar10,
    "recordio": read_recordio,
    "npz": read_npz,
}


def add_arguments(parser):
    parser.add_argument(
        "--source", required=True, metavar="NAME", help=f"one of {[*SOURCES, 'images']}"
    )
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
    streamed = parser.add_argument_group("streamed sources (recordio, images)")
    streamed.add_argument(
        "--val-path",
        type=Path,
        metavar="PATH",
        help="a separate validation .rec or folder: the test split (else split per class)",
    )
    streamed.add_argument(
        "--in-memory",
        action="store_true",
        help="recordio: decode every image into arrays (one image size) instead of streaming",
    )
    synthetic = parser.add_argument_group("synthetic source")
    synthetic.add_argument("--samples", type=int, default=10000, help="images in all")
    synthetic.add_argument("--shape", default="1,28,28", metavar="C,H,W", help="image shape")
    synthetic.add_argument("--classes", type=int, default=10, help="number of classes")


def run(args):
    reader = SOURCES.get(args.source)
    if reader is None and args.source != "images":
        raise DynallocError(
            f"--source {args.source!r}: unknown; known sources: {[*SOURCES, 'images']}"
        )
    if not 0 < args.test_fraction < 1:
        raise DynallocError(f"--test-fraction {args.test_fraction}: must lie between 0 and 1")
    if args.source in PATH_SOURCES and args.path is None:
        raise DynallocError(f"--source {args.source}: needs --path ({PATH_SOURCES[args.source]})")
    if args.source not in PATH_SOURCES and args.path is not None:
        raise DynallocError(f"--path: --source {args.source} reads no files; drop --path")
    if args.in_memory and args.source != "recordio":
        raise DynallocError(f"--in-memory: only for --source recordio, not {args.source}")
    if args.val_path is not None and (args.source not in STREAMED or args.in_memory):
        raise DynallocError("--val-path: only for the streamed sources (recordio, images)")
    if args.source in STREAMED and not args.in_memory:
        print(stage_streamed(args, np.random.default_rng(args.seed)))
        return
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
    print(
        f"staged {args.source}: {len(data.train_y)} train + {len(data.test_y)} test images "
        f"of {dims(data.train_x)}, {data.classes} classes -> {args.out}"
    )
