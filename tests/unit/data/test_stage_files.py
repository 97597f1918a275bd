"""`dynalloc stage` sources that read files (idx, cifar10, recordio --in-memory, npz), from small
files made here: each stages and round-trips, and each damaged input gives one line naming the
file."""

import gzip
import struct
import zlib

import numpy as np
import pytest
from dynalloc.cli import main
from dynalloc.data.staged import load_staged

IDX_STEMS = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
CIFAR_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


# The recordio source decoded into arrays (the streamed default is tested in test_stage_stream.py)
IN_MEMORY = ("--source", "recordio", "--in-memory")


def run_stage(out, *args):
    return main(["stage", "--out", str(out), *args])


def raw_images(path):
    """The staged images with the normalisation undone: the source's pixel values again."""
    data = load_staged(path)
    norm = data.manifest["normalisation"]

    def recover(x):
        return np.rint(np.asarray(x, np.float64) * norm["std"] + norm["mean"])

    return data, recover(data.train_x), recover(data.test_x)


def assert_one_line_naming(capfd, tmp_path, named, *also):
    """One line on stderr (file descriptor 2 included, where C libraries print), naming the file;
    and no staged dataset or temporary directory left in the output's directory."""
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 1 and str(named) in err[0], err
    assert all(text in err[0] for text in also), err
    assert not (tmp_path / "out").exists()
    assert not [path for path in (tmp_path / "out").parent.iterdir() if path.name.startswith(".")]


# ---- idx -----------------------------------------------------------------------------------


def idx_bytes(array, magic):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    return struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.tobytes()


def make_idx(directory, rng, gz, n_train=40, n_test=15, size=(6, 5)):
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, *size), dtype=np.uint8),
        "train_labels": np.arange(n_train) % 10,
        "test_images": rng.integers(0, 256, (n_test, *size), dtype=np.uint8),
        "test_labels": rng.permutation(np.arange(n_test) % 10),
    }
    for key, array in arrays.items():
        data = idx_bytes(array, 0x803 if key.endswith("images") else 0x801)
        name = IDX_STEMS[key] + (".gz" if gz else "")
        (directory / name).write_bytes(gzip.compress(data) if gz else data)
    return arrays


@pytest.mark.parametrize("gz", [True, False], ids=["gzipped", "raw"])
def test_idx_stages_the_files_own_split_in_order(tmp_path, capsys, gz):
    arrays = make_idx(tmp_path / "idx", np.random.default_rng(1), gz)
    assert run_stage(tmp_path / "out", "--source", "idx", "--path", str(tmp_path / "idx")) == 0
    assert "40 train + 15 test images of 1x6x5, 10 classes" in capsys.readouterr().out
    data, train_x, test_x = raw_images(tmp_path / "out")
    np.testing.assert_array_equal(data.train_y, arrays["train_labels"])
    np.testing.assert_array_equal(data.test_y, arrays["test_labels"])
    np.testing.assert_array_equal(train_x[:, 0], arrays["train_images"])
    np.testing.assert_array_equal(test_x[:, 0], arrays["test_images"])
    manifest = data.manifest
    assert manifest["source"] == "idx" and manifest["origin"] == str(tmp_path / "idx")
    assert manifest["test_fraction"] is None and data.classes == 10
    suffix = ".gz" if gz else ""
    assert manifest["files"]["train_images"] == "train-images-idx3-ubyte" + suffix


def test_idx_accepts_dotted_names_and_takes_classes_from_the_labels(tmp_path):
    arrays = make_idx(tmp_path / "idx", np.random.default_rng(2), gz=True)
    for stem in IDX_STEMS.values():  # the names of some mirrors: train-images.idx3-ubyte
        path = tmp_path / "idx" / f"{stem}.gz"
        path.rename(path.with_name(f"{stem.replace('-idx', '.idx')}.gz"))
    labels = arrays["test_labels"] % 4
    (tmp_path / "idx" / "t10k-labels.idx1-ubyte.gz").write_bytes(
        gzip.compress(idx_bytes(labels, 0x801))
    )
    (tmp_path / "idx" / "train-labels.idx1-ubyte.gz").write_bytes(
        gzip.compress(idx_bytes(np.arange(40) % 7, 0x801))
    )
    assert run_stage(tmp_path / "out", "--source", "idx", "--path", str(tmp_path / "idx")) == 0
    assert load_staged(tmp_path / "out").classes == 7


def _truncate(path, keep=-7):
    path.write_bytes(path.read_bytes()[:keep])


def _rewrite_gz(path, change):
    path.write_bytes(gzip.compress(change(gzip.decompress(path.read_bytes()))))


# case -> (file, how to damage it, text the one-line error must hold besides the file's path)
IDX_BAD = {
    "missing file": ("t10k-labels-idx1-ubyte.gz", lambda p: p.unlink(), "missing"),
    "truncated data": (
        "train-images-idx3-ubyte.gz",
        lambda p: _rewrite_gz(p, lambda data: data[:-3]),
        "truncated",
    ),
    "truncated gzip": ("train-images-idx3-ubyte.gz", _truncate, "truncated gzip"),
    "wrong magic": (
        "t10k-images-idx3-ubyte.gz",
        lambda p: _rewrite_gz(p, lambda data: b"\0\0\x08\x01" + data[4:]),
        "0x00000801",
    ),
    "labels file as images": (
        "train-images-idx3-ubyte.gz",
        lambda p: p.write_bytes((p.parent / "train-labels-idx1-ubyte.gz").read_bytes()),
        "magic",
    ),
    "label count": (
        "train-labels-idx1-ubyte.gz",
        lambda p: p.write_bytes(gzip.compress(idx_bytes(np.zeros(39), 0x801))),
        "39 labels",
    ),
    "trailing bytes": (
        "t10k-labels-idx1-ubyte.gz",
        lambda p: _rewrite_gz(p, lambda data: data + b"\0"),
        "longer than its header",
    ),
    "header only": (
        "t10k-labels-idx1-ubyte.gz",
        lambda p: p.write_bytes(b"\0\0\x08"),
        "too short",
    ),
}


@pytest.mark.parametrize("case", IDX_BAD, ids=list(IDX_BAD))
def test_bad_idx_files_are_named(tmp_path, capfd, case):
    name, damage, text = IDX_BAD[case]
    make_idx(tmp_path / "idx", np.random.default_rng(3), gz=True)
    damage(tmp_path / "idx" / name)
    assert run_stage(tmp_path / "out", "--source", "idx", "--path", str(tmp_path / "idx")) == 2
    named = tmp_path / "idx" / (name.removesuffix(".gz") if case == "missing file" else name)
    assert_one_line_naming(capfd, tmp_path, named, text)


def test_truncated_raw_idx_is_named(tmp_path, capfd):
    make_idx(tmp_path / "idx", np.random.default_rng(4), gz=False)
    _truncate(tmp_path / "idx" / "t10k-images-idx3-ubyte", keep=-1)
    assert run_stage(tmp_path / "out", "--source", "idx", "--path", str(tmp_path / "idx")) == 2
    assert_one_line_naming(
        capfd, tmp_path, tmp_path / "idx" / "t10k-images-idx3-ubyte", "15 x 6 x 5"
    )


# ---- cifar10 -------------------------------------------------------------------------------


def make_cifar(directory, rng, per_file=4):
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for name in CIFAR_FILES:
        labels = rng.integers(0, 10, per_file, dtype=np.uint8)
        images = rng.integers(0, 256, (per_file, 3, 32, 32), dtype=np.uint8)
        records = np.concatenate([labels[:, None], images.reshape(per_file, -1)], axis=1)
        (directory / name).write_bytes(records.tobytes())
        arrays[name] = (images, labels)
    return arrays


def test_cifar10_stages_the_batches_in_order(tmp_path, capsys):
    arrays = make_cifar(tmp_path / "cifar", np.random.default_rng(5))
    assert (
        run_stage(tmp_path / "out", "--source", "cifar10", "--path", str(tmp_path / "cifar")) == 0
    )
    assert "20 train + 4 test images of 3x32x32, 10 classes" in capsys.readouterr().out
    data, train_x, test_x = raw_images(tmp_path / "out")
    train = [arrays[name] for name in CIFAR_FILES[:5]]
    np.testing.assert_array_equal(train_x, np.concatenate([x for x, _ in train]))
    np.testing.assert_array_equal(data.train_y, np.concatenate([y for _, y in train]))
    np.testing.assert_array_equal(test_x, arrays["test_batch.bin"][0])
    np.testing.assert_array_equal(data.test_y, arrays["test_batch.bin"][1])
    assert data.classes == 10 and data.manifest["origin"] == str(tmp_path / "cifar")


def _set_label(path, record, label):
    data = bytearray(path.read_bytes())
    data[record * 3073] = label
    path.write_bytes(bytes(data))


CIFAR_BAD = {
    "missing batch": ("data_batch_3.bin", lambda p: p.unlink(), "missing"),
    "missing test": ("test_batch.bin", lambda p: p.unlink(), "missing"),
    "truncated": ("data_batch_2.bin", _truncate, "truncated"),
    "empty": ("data_batch_5.bin", lambda p: p.write_bytes(b""), "empty"),
    "label 10": ("test_batch.bin", lambda p: _set_label(p, 2, 10), "record 2 has label 10"),
    "label 255": ("data_batch_1.bin", lambda p: _set_label(p, 0, 255), "label 255"),
}


@pytest.mark.parametrize("case", CIFAR_BAD, ids=list(CIFAR_BAD))
def test_bad_cifar10_files_are_named(tmp_path, capfd, case):
    name, damage, text = CIFAR_BAD[case]
    make_cifar(tmp_path / "cifar", np.random.default_rng(6))
    damage(tmp_path / "cifar" / name)
    assert (
        run_stage(tmp_path / "out", "--source", "cifar10", "--path", str(tmp_path / "cifar")) == 2
    )
    assert_one_line_naming(capfd, tmp_path, tmp_path / "cifar" / name, text)


# ---- recordio ------------------------------------------------------------------------------


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


def random_images(rng, n, shape):
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8)


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
    "truncated rec": (".rec", lambda rec: _truncate(rec, keep=-20), "record 5"),
    "cut before a record": (".rec", lambda rec: _truncate(rec, keep=100), "truncated"),
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


# ---- npz -----------------------------------------------------------------------------------


def test_npz_with_its_own_split_stages_in_order(tmp_path):
    rng = np.random.default_rng(13)
    arrays = {
        "x_train": random_images(rng, 12, (2, 3, 3)),
        "y_train": np.arange(12) % 4,
        "x_test": random_images(rng, 5, (2, 3, 3)),
        "y_test": np.array([0, 1, 2, 3, 5]),
    }
    np.savez(tmp_path / "set.npz", **arrays)
    assert run_stage(tmp_path / "out", "--source", "npz", "--path", str(tmp_path / "set.npz")) == 0
    data, train_x, test_x = raw_images(tmp_path / "out")
    np.testing.assert_array_equal(train_x, arrays["x_train"])
    np.testing.assert_array_equal(test_x, arrays["x_test"])
    np.testing.assert_array_equal(data.train_y, arrays["y_train"])
    np.testing.assert_array_equal(data.test_y, arrays["y_test"])
    assert data.classes == 6 and data.manifest["test_fraction"] is None


def test_npz_with_x_and_y_is_split_per_class(tmp_path, capsys):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((50, 6, 6)).astype(np.float32)
    y = (np.arange(50) % 5).reshape(-1, 1)  # (N, 1), as Keras stores labels
    np.savez_compressed(tmp_path / "set.npz", x=x, y=y)
    args = ["--source", "npz", "--path", str(tmp_path / "set.npz"), "--test-fraction", "0.4"]
    assert run_stage(tmp_path / "out", *args) == 0
    assert "30 train + 20 test images of 1x6x6, 5 classes" in capsys.readouterr().out
    data = load_staged(tmp_path / "out")
    assert list(np.bincount(data.test_y)) == [4] * 5
    norm = data.manifest["normalisation"]
    restored = np.concatenate([data.train_x, data.test_x])[:, 0] * norm["std"] + norm["mean"]
    original = {image.round(4).tobytes(): label for image, label in zip(x, y[:, 0], strict=True)}
    staged_y = np.concatenate([data.train_y, data.test_y])
    assert {
        img.round(4).tobytes(): lab for img, lab in zip(restored, staged_y, strict=True)
    } == original


def _savez(**arrays):
    return lambda path: np.savez(path, **arrays)


GOOD_X = np.zeros((4, 3, 3), np.uint8) + np.arange(4, dtype=np.uint8)[:, None, None]
GOOD_Y = np.array([0, 1, 0, 1])
NPZ_BAD = {
    "missing": (lambda path: None, "not found"),
    "not a zip": (lambda path: path.write_bytes(b"hello, world"), "not a readable .npz"),
    "truncated": (
        lambda path: (_savez(x=GOOD_X, y=GOOD_Y)(path), _truncate(path, keep=-40)),
        "not a readable .npz",
    ),
    "an npy": (lambda path: path.write_bytes(_npy(GOOD_X)), "not an .npz"),
    "no known arrays": (_savez(images=GOOD_X, labels=GOOD_Y), "found images, labels"),
    "incomplete split": (_savez(x_train=GOOD_X, y_train=GOOD_Y, x_test=GOOD_X), "y_test"),
    "label count": (_savez(x=GOOD_X, y=GOOD_Y[:3]), "3 labels"),
    "float labels": (_savez(x=GOOD_X, y=GOOD_Y.astype(float)), "integer labels"),
    "negative label": (_savez(x=GOOD_X, y=GOOD_Y - 1), "label -1"),
    "2-d images": (_savez(x=GOOD_X.reshape(4, 9), y=GOOD_Y), "N x H x W"),
    "nan": (_savez(x=np.full((4, 2, 2), np.nan), y=GOOD_Y), "NaN"),
    "shapes differ": (
        _savez(x_train=GOOD_X, y_train=GOOD_Y, x_test=GOOD_X[:, :2], y_test=GOOD_Y),
        "x_test 1x2x3",
    ),
    "one image in a class": (_savez(x=GOOD_X, y=np.array([0, 1, 1, 1])), "class 0"),
}


def _npy(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("case", NPZ_BAD, ids=list(NPZ_BAD))
def test_bad_npz_files_are_named(tmp_path, capfd, case):
    write, text = NPZ_BAD[case]
    path = tmp_path / "set.npz"
    write(path)
    assert run_stage(tmp_path / "out", "--source", "npz", "--path", str(path)) == 2
    assert_one_line_naming(capfd, tmp_path, path, text)


# ---- --path --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["idx", "cifar10", "recordio", "npz"])
def test_file_sources_need_path(tmp_path, capfd, source):
    assert run_stage(tmp_path / "out", "--source", source) == 2
    assert_one_line_naming(capfd, tmp_path, f"--source {source}", "--path")


def test_directory_sources_refuse_a_file(tmp_path, capfd):
    (tmp_path / "file").write_text("")
    assert run_stage(tmp_path / "out", "--source", "idx", "--path", str(tmp_path / "file")) == 2
    assert_one_line_naming(capfd, tmp_path, tmp_path / "file", "not a directory")


def test_path_with_a_source_that_reads_no_files_is_refused(tmp_path, capfd):
    assert run_stage(tmp_path / "out", "--source", "digits", "--path", str(tmp_path)) == 2
    assert_one_line_naming(capfd, tmp_path, "--source digits", "--path")
