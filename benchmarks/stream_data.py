"""Fashion-MNIST as the files a streamed dataset is staged from, for `make bench-stream`.

Why: the streamed sources read JPEG images where they lie, as MXNet's im2rec packs them (an
indexed RecordIO pair) or as an image folder (one sub-folder per class), and nothing of that
kind ships on this machine; Debian's `dataset-fashion-mnist` has the IDX files, read here with
numpy and gzip. Written for the train set (60,000) and the test set (10,000, the separate
validation file or folder), at 28x28 grayscale and at 96x96 (upscaled bilinearly, RGB: a
3-channel set with images that cost more to decode), plus the first 6,000 train images at
28x28 as a RecordIO of their own (memory against the number of images):

    OUT/28x28/{train,val,train6k}.rec (+ .idx)  OUT/28x28/{train,val}/0..9/NNNNN.jpg
    OUT/96x96/{train,val}.rec (+ .idx)          OUT/96x96/{train,val}/0..9/NNNNN.jpg

Records are `mx.recordio.pack(IRHeader(0, label, key, 0), jpeg)`, the layout `pack_img` writes,
with the JPEG (quality 90) from Pillow; the same bytes go into the folders. Every
file and folder is written under a temporary name and renamed when complete (a pair's `.idx`
last), and what already exists is skipped.
"""

import argparse
import gzip
import io
import os
import shutil
from pathlib import Path

import mxnet as mx
import numpy as np
from dynalloc.data.progress import Progress
from PIL import Image

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
SPLITS = {"train": ("train", 60000), "val": ("t10k", 10000)}  # name: IDX prefix, images
SIZES = (28, 96)
SUBSET = ("train6k", 6000)  # the first train images, as a RecordIO of their own (28x28 only)
QUALITY = 90


def read_idx(prefix, n):
    """(n, 28, 28) uint8 images and (n,) labels of the IDX pair `prefix`-{images,labels}."""
    with gzip.open(FASHION_MNIST / f"{prefix}-images-idx3-ubyte.gz") as handle:
        images = np.frombuffer(handle.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(FASHION_MNIST / f"{prefix}-labels-idx1-ubyte.gz") as handle:
        labels = np.frombuffer(handle.read(), np.uint8, offset=8)
    if not len(images) == len(labels) == n:
        raise SystemExit(f"{FASHION_MNIST}/{prefix}: {len(images)} images, {len(labels)} labels")
    return images, labels


def jpeg(pixels, size):
    """JPEG bytes of a 28x28 grayscale image, or of it upscaled to size x size in RGB."""
    image = Image.fromarray(pixels, "L")
    if size != 28:
        image = image.resize((size, size), Image.BILINEAR).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=QUALITY)
    return buffer.getvalue()


class RecordPair:
    """`path` (.rec) and its .idx, as MXIndexedRecordIO writes them, of the first `count`."""

    def __init__(self, path, count):
        self.path, self.count = path, count
        self.idx = path.with_suffix(".idx")
        self.tmp = [p.with_name(f".{p.name}.tmp") for p in (path, self.idx)]

    def name(self):
        return self.path.name

    def done(self):
        return self.path.is_file() and self.idx.is_file()

    def open(self):
        self.writer = mx.recordio.MXIndexedRecordIO(str(self.tmp[1]), str(self.tmp[0]), "w")

    def add(self, key, label, data):
        header = mx.recordio.IRHeader(0, float(label), key, 0)
        self.writer.write_idx(key, mx.recordio.pack(header, data))

    def close(self):
        self.writer.close()
        os.replace(self.tmp[0], self.path)
        os.replace(self.tmp[1], self.idx)

    def size(self):
        return self.path.stat().st_size


class ImageFolder:
    """`path`/<label>/<key>.jpg of the first `count`."""

    def __init__(self, path, count):
        self.path, self.count = path, count
        self.tmp = path.with_name(f".{path.name}.tmp")

    def name(self):
        return f"{self.path.name}/"

    def done(self):
        return self.path.is_dir()

    def open(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        for label in range(10):
            (self.tmp / str(label)).mkdir(parents=True)

    def add(self, key, label, data):
        (self.tmp / str(label) / f"{key:05d}.jpg").write_bytes(data)

    def close(self):
        os.replace(self.tmp, self.path)

    def size(self):
        return sum(f.stat().st_size for f in self.path.rglob("*.jpg"))


def outputs(out, size, split, n):
    folder = out / f"{size}x{size}"
    made = [RecordPair(folder / f"{split}.rec", n), ImageFolder(folder / split, n)]
    if size == 28 and split == "train":
        made.append(RecordPair(folder / f"{SUBSET[0]}.rec", SUBSET[1]))
    return made


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/bench-stream"))
    args = parser.parse_args()
    made = []
    for split, (prefix, n) in SPLITS.items():
        images = None
        for size in SIZES:
            targets = outputs(args.out, size, split, n)
            made += targets
            todo = [t for t in targets if not t.done()]
            if not todo:
                continue
            if images is None:
                images, labels = read_idx(prefix, n)
            for target in todo:
                target.path.parent.mkdir(parents=True, exist_ok=True)
                target.open()
            count = max(t.count for t in todo)
            names = ", ".join(t.name() for t in todo)
            progress = Progress(count, f"{size}x{size} {split} -> {names}")
            for key in range(count):
                data = jpeg(images[key], size)
                for target in todo:
                    if key < target.count:
                        target.add(key, labels[key], data)
                progress.update()
            for target in todo:
                target.close()
            progress.close()
    for target in made:
        kind = "images" if isinstance(target, ImageFolder) else "records"
        print(f"{target.size() / 1e6:7.1f} MB  {target.count:6,} {kind:7s}  {target.path}")


if __name__ == "__main__":
    main()
