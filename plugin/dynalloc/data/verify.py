"""`dynalloc verify DIR`: every image of a staged dataset decoded once, in parallel, with
progress, for those who want to know before training that no record is broken.

Training checks a streamed dataset's index only (time in proportion to the index); this reads
every byte. Staged arrays are checked as training's rank 0 checks them (sha256, labels, NaN).
`--report FILE` writes what was found as JSON (the pipeline's `verify` target).
"""

import multiprocessing
import os
import sys
import time
from pathlib import Path

from dynalloc import rundir
from dynalloc.data.dataset import open_dataset
from dynalloc.data.images import BadImage, decode_pixels
from dynalloc.data.progress import Progress
from dynalloc.data.records import BadRecord
from dynalloc.data.streamed import SPLITS, StreamedDataset
from dynalloc.errors import DynallocError

CHUNK = 256  # images per task
SHOWN = 10  # bad images listed on stderr

_dataset = None  # each worker process's own StreamedDataset


def add_arguments(parser):
    parser.add_argument("dataset", type=Path, metavar="DIR", help="a staged dataset")
    parser.add_argument(
        "--workers",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="decoding processes (default: the cores this process may use)",
    )
    parser.add_argument("--report", type=Path, metavar="FILE", help="write the findings as JSON")


def run(args):
    if args.workers < 1:
        raise DynallocError(f"--workers {args.workers}: must be at least 1")
    began = time.perf_counter()
    data = open_dataset(args.dataset, verify=True)
    bad = _decode_all(data, args.workers) if isinstance(data, StreamedDataset) else []
    images = data.train_size + data.test_size
    report = {
        "dataset": str(args.dataset),
        "images": images,
        "bad": bad,
        "seconds": round(time.perf_counter() - began, 3),
    }
    if args.report:
        rundir.write_json(args.report, report)
    if bad:
        for line in bad[:SHOWN]:
            print(line, file=sys.stderr)
        raise DynallocError(f"{args.dataset}: {len(bad)} of {images} images do not decode")
    print(f"verified {args.dataset}: {images} images, all readable ({report['seconds']:.1f} s)")


def _decode_all(data, workers):
    """The bad images of both splits, as 'where: why' lines, in index order."""
    tasks = [
        (split, start, min(start + CHUNK, len(data.index[split])))
        for split in SPLITS
        for start in range(0, len(data.index[split]), CHUNK)
    ]
    progress = Progress(data.train_size + data.test_size, f"verifying {data.path.name}")
    bad = []
    # fork: the workers need nothing but this module and the dataset's path, and no MPI or
    # MXNet is loaded in this process.
    context = multiprocessing.get_context("fork")
    with context.Pool(workers, initializer=_open, initargs=(data.path,)) as pool:
        for found, count in pool.imap(_check, tasks):
            bad += found
            progress.update(count)
    progress.close()
    return bad


def _open(path):
    global _dataset
    _dataset = open_dataset(path)


def _check(task):
    """(bad lines, images checked) of one chunk: each image read, decoded and its size
    compared with the one staging read from its header."""
    split, start, stop = task
    bad = []
    for i in range(start, stop):
        row = _dataset.index[split][i]
        try:
            _, payload = _dataset.read(split, i)
            pixels = decode_pixels(payload, _dataset.channels)
            if pixels.shape[:2] != (row["height"], row["width"]):
                raise BadImage(
                    f"decodes to {pixels.shape[0]}x{pixels.shape[1]}, but its header said "
                    f"{row['height']}x{row['width']}"
                )
        except BadRecord as error:
            bad.append(str(error))
        except BadImage as error:
            bad.append(f"{_dataset.name(split, i)}: {error}")
    return bad, stop - start
