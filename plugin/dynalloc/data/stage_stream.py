"""`dynalloc stage` for the streamed sources (`recordio`, `images`): index, split and vouch for
the images where they lie, then estimate the normalisation from a sample of them.

The split is the files' own when a validation file or folder is given (`--val-path`), else the
same fraction of every class, as for the in-memory sources.
"""

import sys

import numpy as np

from dynalloc.data.catalogue import catalogue_images, catalogue_recordio
from dynalloc.data.images import BadImage, decode_pixels
from dynalloc.data.records import BadRecord
from dynalloc.data.source import OWN_SPLIT, stratified_split
from dynalloc.data.streamed import SPLITS, StreamedDataset, write_streamed
from dynalloc.errors import DynallocError

NORMALISATION_SAMPLE = 1000  # train images decoded to estimate the mean and std


def stage_streamed(args, rng):
    """Stage args.path (and args.val_path) as a streamed dataset into args.out; returns a line
    that says what was staged."""
    paths, class_names = None, None
    if args.source == "recordio":
        rows, entry = catalogue_recordio(args.path, 0)
        files = [entry]
        if args.val_path:
            test_rows, val_entry = catalogue_recordio(args.val_path, 1)
            files.append(val_entry)
    else:
        rows, image_paths, class_names, entry = catalogue_images(args.path)
        files = [entry]
        if args.val_path:
            test_rows, test_paths, _, val_entry = catalogue_images(args.val_path, class_names)
            files.append(val_entry)
            paths = {"train": image_paths, "test": test_paths}
    if args.val_path:
        index, details = {"train": rows, "test": test_rows}, dict(OWN_SPLIT)
    else:
        train, _, test, _ = stratified_split(
            np.arange(len(rows)), rows["label"], args.test_fraction, rng, str(args.path)
        )
        index = {"train": rows[train], "test": rows[test]}
        details = {"split": "per class", "test_fraction": args.test_fraction}
        if class_names is not None:  # an image folder: each split lists its own paths
            paths = {}
            for split in SPLITS:
                paths[split] = [image_paths[i] for i in index[split]["file"]]
                index[split]["file"] = np.arange(len(index[split]))
    everything = np.concatenate([index[split] for split in SPLITS])
    classes = len(class_names) if class_names else int(everything["label"].max()) + 1
    sizes = np.unique(everything[["height", "width"]])
    manifest = {
        "source": args.source,
        "classes": classes,
        "class_names": class_names,
        "channels": 3 if (everything["channels"] == 3).any() else 1,
        "image_size": [int(sizes[0][0]), int(sizes[0][1])] if len(sizes) == 1 else None,
        "image_sizes": {
            "smallest": _extreme(everything, np.argmin),
            "largest": _extreme(everything, np.argmax),
        },
        "files": files,
        "seed": args.seed,
        **details,
    }
    dataset = StreamedDataset(path=args.out, manifest=manifest, index=index, paths=paths or {})
    manifest["normalisation"] = _normalisation(dataset)
    write_streamed(args.out, index, paths, manifest)
    staged = sum(f.stat().st_size for f in args.out.iterdir())
    data = sum(f["bytes"] for f in files)
    return (
        f"staged {args.source} (streamed): {dataset.train_size} train + {dataset.test_size} test "
        f"images of {_sizes(manifest)}, {manifest['channels']} channel(s), {classes} classes; "
        f"index {staged / 1e6:.2f} MB for {data / 1e6:.1f} MB of images -> {args.out}"
    )


def _extreme(rows, pick):
    area = rows["height"].astype(np.int64) * rows["width"]
    row = rows[pick(area)]
    return [int(row["height"]), int(row["width"])]


def _sizes(manifest):
    if manifest["image_size"]:
        return "x".join(map(str, manifest["image_size"]))
    small, large = manifest["image_sizes"]["smallest"], manifest["image_sizes"]["largest"]
    return f"{small[0]}x{small[1]} to {large[0]}x{large[1]}"


def _normalisation(dataset):
    """Per-channel mean and std of the pixels (0-255) of up to NORMALISATION_SAMPLE train
    images spread evenly over the split, each at its own size."""
    n = dataset.train_size
    chosen = np.unique(np.linspace(0, n - 1, min(n, NORMALISATION_SAMPLE)).astype(np.int64))
    channels = dataset.channels
    total, squares, count = np.zeros(channels), np.zeros(channels), 0
    notes = []  # what the decoder said of images that did decode, named, after the pass
    for i in chosen:
        _, payload = dataset.read("train", int(i))
        said = []
        try:
            pixels = decode_pixels(payload, channels, said).reshape(-1, channels)
        except BadImage as error:
            raise BadRecord(f"{dataset.name('train', int(i))}: {error}") from None
        notes += [f"{dataset.name('train', int(i))}: {line}" for line in said]
        pixels = pixels.astype(np.float64)
        total += pixels.sum(axis=0)
        squares += np.square(pixels).sum(axis=0)
        count += len(pixels)
    for line in notes:
        print(line, file=sys.stderr)
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    if not (std > 0).all():
        raise DynallocError(
            f"{dataset.name('train', 0)}: the sampled images have one colour; cannot normalise"
        )
    return {
        "mean": [round(float(m), 4) for m in mean],
        "std": [round(float(s), 4) for s in std],
        "computed_on": f"{len(chosen)} of {n} train images",
    }
