"""`dynalloc stage --source recordio --in-memory` (`dynalloc.data.recordio`): a RecordIO pair
made here decoded into arrays, split per class, gray or colour; each damaged file or record gives
one line naming the file."""

import struct
import zlib

import numpy as np
import pytest
from dynalloc.data.staged import load_staged
from file_sources import assert_one_line_naming, random_images, raw_images, run_stage, truncate

# The recordio source decoded into arrays (the streamed default: test_streamed_stage_recordio.py)
IN_MEMORY = ("--source", "recordio", "--in-memory")


def png_bytes(image):
    """A PNG of a uint8 H x W (grayscale) or H x W x 3 (RGB) array. What `pack_img(...,
    img_fmt='.png')` stores, without needing OpenCV (cv2), which the training env lacks."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    height, width = image.shape[:2]
    colour_type = 0 if image.ndim == 2 else 2
    rows = b"".join(b"\0" + image[row].tobytes() for row in range(height))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def make_recordio(path, images, labels, encode=png_bytes):
    """A .rec and its .idx as im2rec writes them: one packed image per record, keyed 0..N-1."""
    mx = pytest.importorskip("mxnet")
    writer = mx.recordio.MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    for key, (image, label) in enumerate(zip(images, labels, strict=True)):
        header = mx.recordio.IRHeader(0, float(label), key, 0)
        writer.write_idx(key, mx.recordio.pack(header, encode(image)))
    writer.close()
    return path


@pytest.mark.parametrize(
    ("shape", "staged_shape"), [((7, 6), (1, 7, 6)), ((5, 4, 3), (3, 5, 4))], ids=["gray", "rgb"]
)
def test_recordio_stages_a_stratified_split_of_the_images(tmp_path, capsys, shape, staged_shape):
    rng = np.random.default_rng(7)
    images, labels = random_images(rng, 30, shape), np.arange(30) % 3
    rec = make_recordio(tmp_path / "set.rec", images, labels)
    assert run_stage(tmp_path / "out", *IN_MEMORY, "--path", str(rec)) == 0
    assert "24 train + 6 test images" in capsys.readouterr().out
    data, train_x, test_x = raw_images(tmp_path / "out")
    assert data.input_shape == staged_shape and data.classes == 3
    assert sorted(np.bincount(data.test_y)) == [2, 2, 2]
    label_of = {image.tobytes(): label for image, label in zip(images, labels, strict=True)}
    staged = np.concatenate([train_x, test_x]).astype(np.uint8)
    if len(shape) == 3:
        staged = staged.transpose(0, 2, 3, 1)  # back to H x W x C, channels in RGB order
    staged_labels = np.concatenate([data.train_y, data.test_y])
    assert {
        image.tobytes(): label for image, label in zip(staged, staged_labels, strict=True)
    } == label_of
    assert data.manifest["origin"] == str(rec) and data.manifest["test_fraction"] == 0.2


def test_recordio_split_follows_seed_and_test_fraction(tmp_path):
    rng = np.random.default_rng(8)
    rec = make_recordio(tmp_path / "set.rec", random_images(rng, 40, (4, 4)), np.arange(40) % 4)
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        args = [*IN_MEMORY, "--path", str(rec), "--seed", seed, "--test-fraction", ".5"]
        assert run_stage(tmp_path / name, *args) == 0
    a, b, c = (load_staged(tmp_path / name) for name in "abc")
    assert len(a.test_y) == 20
    assert np.array_equal(a.test_x, b.test_x) and not np.array_equal(a.test_x, c.test_x)


def test_recordio_reads_jpeg_as_gray_or_colour(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    import io

    def jpeg(image):
        buffer = io.BytesIO()
        image_module.fromarray(image).save(buffer, format="JPEG", quality=95)
        return buffer.getvalue()

    smooth = np.linspace(0, 200, 16 * 16).reshape(16, 16).astype(np.uint8)
    for name, images, channels in (
        ("gray", np.stack([smooth + 5 * i for i in range(4)]), 1),
        ("rgb", np.stack([np.stack([smooth] * 3, axis=2) + 5 * i for i in range(4)]), 3),
    ):
        rec = make_recordio(tmp_path / f"{name}.rec", images, [0, 1, 0, 1], encode=jpeg)
        assert run_stage(tmp_path / name, *IN_MEMORY, "--path", str(rec)) == 0
        data = load_staged(tmp_path / name)
        assert data.input_shape == (channels, 16, 16), name


def _overwrite_png(rec, key, at, data):
    """Overwrite bytes of the PNG in record `key` (after its 8-byte frame and 24-byte header)."""
    content = bytearray(rec.read_bytes())
    offset = int(rec.with_suffix(".idx").read_text().splitlines()[key].split("\t")[1])
    content[offset + 8 + 24 + at : offset + 8 + 24 + at + len(data)] = data
    rec.write_bytes(bytes(content))


def _truncate_png(rec):
    """Cut the IDAT chunk of record 2 short, keeping the record's framing valid."""
    mx = pytest.importorskip("mxnet")
    reader = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    items = [reader.read_idx(key) for key in reader.keys]
    reader.close()
    items[2] = items[2][:60]
    writer = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "w")
    for key, item in enumerate(items):
        writer.write_idx(key, item)
    writer.close()


def _relabel(rec, label, flag=0):
    images = random_images(np.random.default_rng(10), 6, (4, 4))
    mx = pytest.importorskip("mxnet")
    writer = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "w")
    for key, image in enumerate(images):
        value = label if key == 3 else float(key % 2)
        header = mx.recordio.IRHeader(flag if key == 3 else 0, value, key, 0)
        writer.write_idx(key, mx.recordio.pack(header, png_bytes(image)))
    writer.close()


RECORDIO_BAD = {
    "missing rec": (".rec", lambda rec: rec.unlink(), "not found"),
    "missing idx": (".idx", lambda rec: rec.with_suffix(".idx").unlink(), "index missing"),
    "truncated rec": (".rec", lambda rec: truncate(rec, keep=-20), "record 5"),
    "cut before a record": (".rec", lambda rec: truncate(rec, keep=100), "truncated"),
    "undecodable image": (
        ".rec",
        lambda rec: _overwrite_png(rec, 1, 0, b"garbage!"),
        "record 1: cannot decode",
    ),
    # MXNet returns an image for this one; libpng's complaint on fd 2 is what gives it away
    "corrupt png chunk": (
        ".rec",
        lambda rec: _overwrite_png(rec, 4, 40, b"X"),
        "record 4: cannot decode the image (libpng error: IDA",
    ),
    "truncated image": (".rec", _truncate_png, "record 2: cannot decode"),
    "bad index line": (
        ".idx",
        lambda rec: rec.with_suffix(".idx").write_text("0\t0\nnonsense\n"),
        "line 2",
    ),
    "misaligned offset": (
        ".rec",
        lambda rec: rec.with_suffix(".idx").write_text("0\t0\n1\t12\n"),
        "record 1",
    ),
    "fractional label": (".rec", lambda rec: _relabel(rec, 1.5), "label 1.5"),
    "negative label": (".rec", lambda rec: _relabel(rec, -1.0), "label -1"),
    "several labels": (".rec", lambda rec: _relabel(rec, [1.0, 2.0], flag=2), "2 labels"),
    "empty index": (".idx", lambda rec: rec.with_suffix(".idx").write_text(""), "no records"),
}


@pytest.mark.parametrize("case", RECORDIO_BAD, ids=list(RECORDIO_BAD))
def test_bad_recordio_files_are_named(tmp_path, capfd, case):
    suffix, damage, text = RECORDIO_BAD[case]
    rng = np.random.default_rng(11)
    rec = make_recordio(tmp_path / "set.rec", random_images(rng, 6, (4, 4)), np.arange(6) % 2)
    capfd.readouterr()
    damage(rec)
    assert run_stage(tmp_path / "out", *IN_MEMORY, "--path", str(rec)) == 2
    assert_one_line_naming(capfd, tmp_path, rec.with_suffix(suffix), text)


def test_truncated_jpeg_is_named(tmp_path, capfd):
    """MXNet decodes a JPEG cut in half without complaint (grey below the cut)."""
    image_module = pytest.importorskip("PIL.Image")
    import io

    def half_a_jpeg(image):
        buffer = io.BytesIO()
        image_module.fromarray(image).save(buffer, format="JPEG")
        return buffer.getvalue()[: len(buffer.getvalue()) // 2]

    images = random_images(np.random.default_rng(15), 4, (16, 16, 3))
    rec = make_recordio(tmp_path / "set.rec", images, [0, 1, 0, 1], encode=half_a_jpeg)
    assert run_stage(tmp_path / "out", *IN_MEMORY, "--path", str(rec)) == 2
    assert_one_line_naming(capfd, tmp_path, rec, "record 0", "truncated")


def test_recordio_images_of_different_sizes_are_named(tmp_path, capfd):
    rng = np.random.default_rng(12)
    images = [*random_images(rng, 3, (4, 4)), *random_images(rng, 3, (5, 4))]
    rec = make_recordio(tmp_path / "set.rec", images, [0, 1, 0, 1, 0, 1])
    assert run_stage(tmp_path / "out", *IN_MEMORY, "--path", str(rec)) == 2
    assert_one_line_naming(capfd, tmp_path, rec, "record 3 is 5x4", "record 0 is 4x4")
