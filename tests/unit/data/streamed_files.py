"""Small real inputs for the streamed-dataset tests: images encoded with Pillow, RecordIO pairs
written with MXNet's own writer (as im2rec writes them), folders of class folders, the
`dynalloc stage` command run in-process, a staged dataset opened, and the normalisation staging
should estimate."""

import io
import json

import numpy as np
import pytest
from dynalloc.cli import main
from dynalloc.data.images import decode_pixels
from dynalloc.data.streamed import load_streamed

Image = pytest.importorskip("PIL.Image")


def mxnet():
    """MXNet, imported when a RecordIO file is first written or read (seconds, not needed by
    the tests of images alone)."""
    return pytest.importorskip("mxnet")


def encode(pixels, fmt="PNG", **options):
    """The bytes of `pixels` (H x W gray, H x W x 3 RGB, or a Pillow image) as `fmt`."""
    image = pixels if isinstance(pixels, Image.Image) else Image.fromarray(np.asarray(pixels))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def smooth(rng, shape):
    """A uint8 image that is not noise (JPEG keeps it close): a gradient plus a random offset."""
    height, width = shape[:2]
    ramp = np.add.outer(np.arange(height) * 7, np.arange(width) * 5)
    if len(shape) == 3:
        ramp = ramp[:, :, None] + np.arange(shape[2]) * 40
    return ((ramp + rng.integers(0, 60)) % 200 + 20).astype(np.uint8)


def pack(label, payload, key=0, flag=0):
    """One image record as `mx.recordio.pack` makes it; a list `label` gives flag = its size."""
    recordio = mxnet().recordio
    return recordio.pack(recordio.IRHeader(flag, label, key, 0), payload)


def write_records(path, records, keys=None):
    """A .rec (and its .idx) holding `records` (bytes each) under `keys` (default 0..N-1)."""
    keys = range(len(records)) if keys is None else keys
    writer = mxnet().recordio.MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    for key, record in zip(keys, records, strict=True):
        writer.write_idx(key, record)
    writer.close()
    return path


def image_rec(path, images, labels, fmt="PNG", **options):
    """A RecordIO pair of `images` encoded as `fmt`, record k labelled labels[k]."""
    records = [
        pack(float(label), encode(image, fmt, **options), key)
        for key, (image, label) in enumerate(zip(images, labels, strict=True))
    ]
    return write_records(path, records)


def image_folder(root, classes, fmt="PNG", suffix=".png"):
    """A folder of class folders: `classes` maps a class name to its list of images."""
    for name, images in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i, image in enumerate(images):
            (root / name / f"img{i:03d}{suffix}").write_bytes(encode(image, fmt))
    return root


def folder_set(root, rng, counts, shape=(6, 5, 3)):
    classes = {name: [smooth(rng, shape) for _ in range(n)] for name, n in counts.items()}
    return image_folder(root, classes), classes


def idx_offsets(rec):
    """{key: offset} of a .rec's .idx."""
    lines = rec.with_suffix(".idx").read_text().splitlines()
    return {int(k): int(v) for k, v in (line.split("\t") for line in lines if line.strip())}


def stage(out, *args):
    """`dynalloc stage --out OUT ARGS` in this process: its exit code."""
    return main(["stage", "--out", str(out), *map(str, args)])


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


def opened(out):
    return load_streamed(out, manifest(out))


def true_normalisation(images, channels):
    """Per-channel mean and std of every pixel of `images` (each at its own size) as
    `channels` channels: what staging estimates from up to 1000 of them."""
    pixels = np.concatenate(
        [decode_pixels(encode(image), channels).reshape(-1, channels) for image in images]
    ).astype(np.float64)
    return pixels.mean(axis=0), pixels.std(axis=0)


def assert_refused(capfd, code, out, *texts):
    """Exit code 2, one line on stderr holding every text, and nothing left where `out` would
    be: neither the directory nor a temporary one beside it."""
    err = capfd.readouterr().err.splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    assert all(str(text) in err[0] for text in texts), err
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]
    return err[0]


def stage_refused(capfd, out, args, *texts):
    """Stage with `args` after clearing what was printed so far: refused as `assert_refused`
    says, the line holding every text; the line."""
    capfd.readouterr()
    return assert_refused(capfd, stage(out, *args), out, *texts)
