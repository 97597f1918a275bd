"""`dynalloc stage --source recordio` (streamed): the index, split and manifest of a RecordIO
pair made here, indexed where it lies, with and without `--val-path`; mixed sizes and channels,
a JPEG whose frame header lies past 4096 bytes (in a folder too), multi-part records, restaging."""

import hashlib
import struct

import numpy as np
from dynalloc.data.records import MAGIC
from dynalloc.data.streamed import INDEX_DTYPE
from streamed_files import (
    encode,
    idx_offsets,
    image_rec,
    manifest,
    opened,
    pack,
    smooth,
    stage,
    true_normalisation,
    write_records,
)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gray_set(rng, n=30, shape=(9, 7), classes=3):
    return [smooth(rng, shape) for _ in range(n)], np.arange(n) % classes


def test_recordio_is_indexed_where_it_lies_and_split_per_class(tmp_path, capsys):
    images, labels = gray_set(np.random.default_rng(0))
    rec = image_rec(tmp_path / "set.rec", images, labels)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 3) == 0
    out = capsys.readouterr().out
    assert "staged recordio (streamed): 24 train + 6 test images of 9x7, 1 channel(s), 3 classes"
    assert "24 train + 6 test images of 9x7, 1 channel(s), 3 classes" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "manifest.json", "test_index.npy", "train_index.npy",
    ]  # fmt: skip
    m = manifest(tmp_path / "out")
    assert m["storage"] == "stream" and m["source"] == "recordio" and m["format_version"] == 1
    assert m["classes"] == 3 and m["class_names"] is None and m["channels"] == 1
    assert m["image_size"] == [9, 7]
    assert m["image_sizes"] == {"smallest": [9, 7], "largest": [9, 7]}
    assert m["files"] == [
        {
            "path": str(rec),
            "bytes": rec.stat().st_size,
            "index": str(rec.with_suffix(".idx")),
            "index_sha256": sha256(rec.with_suffix(".idx")),
        }
    ]
    assert m["split"] == "per class" and m["test_fraction"] == 0.2 and m["seed"] == 3
    assert m["splits"]["train"]["n"] == 24 and m["splits"]["test"]["n"] == 6
    for name in ("train_index.npy", "test_index.npy"):
        assert m["sha256"][name] == sha256(tmp_path / "out" / name)

    data = opened(tmp_path / "out")
    offsets = idx_offsets(rec)
    ends = dict(zip(sorted(offsets.values()), [*sorted(offsets.values())[1:], rec.stat().st_size],
                    strict=True))  # fmt: skip
    keys = []
    for split in ("train", "test"):
        index = data.index[split]
        assert index.dtype == INDEX_DTYPE
        for i, row in enumerate(index):
            key = int(row["key"])
            keys.append(key)
            assert row["file"] == 0 and row["offset"] == offsets[key]
            assert row["length"] == ends[offsets[key]] - offsets[key]
            assert row["label"] == labels[key] and row["channels"] == 1
            assert (row["height"], row["width"]) == (9, 7)
            assert data.read(split, i) == (labels[key], encode(images[key]))
            assert data.name(split, i) == f"{rec}: record {key}"
    assert sorted(keys) == list(range(30))
    assert sorted(np.bincount(data.index["test"]["label"])) == [2, 2, 2]  # 20 % of each class

    mean, std = true_normalisation([images[k] for k in data.index["train"]["key"]], 1)
    norm = m["normalisation"]
    np.testing.assert_allclose(norm["mean"], mean, atol=1e-3)
    np.testing.assert_allclose(norm["std"], std, atol=1e-3)
    assert norm["computed_on"] == "24 of 24 train images"


def test_the_staged_directory_is_a_small_fraction_of_the_images(tmp_path):
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (32, 32, 3), np.uint8) for _ in range(60)]  # 3 kB PNGs
    rec = image_rec(tmp_path / "set.rec", images, np.arange(60) % 4)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec) == 0
    staged = sum(p.stat().st_size for p in (tmp_path / "out").iterdir())
    assert staged < 0.05 * rec.stat().st_size, (staged, rec.stat().st_size)
    rows = 60 * INDEX_DTYPE.itemsize
    assert (tmp_path / "out" / "train_index.npy").stat().st_size < rows  # no pixels in it


def test_the_split_follows_the_seed_and_the_test_fraction(tmp_path):
    images, labels = gray_set(np.random.default_rng(2), n=40, classes=4)
    rec = image_rec(tmp_path / "set.rec", images, labels)
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        args = ["--source", "recordio", "--path", rec, "--seed", seed, "--test-fraction", 0.5]
        assert stage(tmp_path / name, *args) == 0
    a, b, c = (tmp_path / name for name in "abc")
    for split in ("train", "test"):
        name = f"{split}_index.npy"
        assert (a / name).read_bytes() == (b / name).read_bytes()
    a_test, c_test = (set(opened(d).index["test"]["key"]) for d in (a, c))
    assert len(a_test) == 20 and a_test != c_test
    assert sorted(np.bincount(opened(c).index["test"]["label"])) == [5] * 4


def test_a_validation_rec_is_the_test_split(tmp_path, capsys):
    rng = np.random.default_rng(3)
    train, train_labels = gray_set(rng, n=10, classes=2)
    val, val_labels = gray_set(rng, n=4, classes=2)
    rec = image_rec(tmp_path / "train.rec", train, train_labels)
    val_rec = image_rec(tmp_path / "val.rec", val, val_labels)
    args = ["--source", "recordio", "--path", rec, "--val-path", val_rec]
    assert stage(tmp_path / "out", *args) == 0
    assert "10 train + 4 test images" in capsys.readouterr().out
    m = manifest(tmp_path / "out")
    assert m["split"] == "the files' own" and m["test_fraction"] is None
    assert [f["path"] for f in m["files"]] == [str(rec), str(val_rec)]
    assert m["files"][1]["index_sha256"] == sha256(val_rec.with_suffix(".idx"))
    data = opened(tmp_path / "out")
    assert list(data.index["train"]["key"]) == list(range(10))  # the index's own order
    assert list(data.index["test"]["key"]) == list(range(4))
    assert set(data.index["train"]["file"]) == {0} and set(data.index["test"]["file"]) == {1}
    for i in range(4):
        assert data.read("test", i) == (val_labels[i], encode(val[i]))
        assert data.name("test", i) == f"{val_rec}: record {i}"


def test_mixed_sizes_have_no_one_image_size(tmp_path, capsys):
    rng = np.random.default_rng(4)
    shapes = [(4, 4), (9, 8), (5, 12), (6, 6)] * 3
    images = [smooth(rng, shape) for shape in shapes]
    rec = image_rec(tmp_path / "set.rec", images, np.arange(12) % 2)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec) == 0
    assert "images of 4x4 to 9x8, 1 channel(s)" in capsys.readouterr().out
    m = manifest(tmp_path / "out")
    assert m["image_size"] is None
    assert m["image_sizes"] == {"smallest": [4, 4], "largest": [9, 8]}
    data = opened(tmp_path / "out")
    for split in ("train", "test"):
        for row in data.index[split]:
            assert (row["height"], row["width"]) == shapes[row["key"]]
    mean, std = true_normalisation([images[k] for k in data.index["train"]["key"]], 1)
    np.testing.assert_allclose(m["normalisation"]["mean"], mean, atol=1e-3)
    np.testing.assert_allclose(m["normalisation"]["std"], std, atol=1e-3)


def test_mixed_gray_and_colour_are_staged_as_colour(tmp_path):
    rng = np.random.default_rng(5)
    images = [smooth(rng, (6, 5, 3) if i % 3 else (6, 5)) for i in range(12)]
    rec = image_rec(tmp_path / "set.rec", images, np.arange(12) % 2)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec) == 0
    m = manifest(tmp_path / "out")
    assert m["channels"] == 3
    data = opened(tmp_path / "out")
    channels = {int(r["key"]): int(r["channels"]) for s in ("train", "test") for r in data.index[s]}
    assert channels == {i: 3 if i % 3 else 1 for i in range(12)}  # each image's own
    mean, std = true_normalisation([images[k] for k in data.index["train"]["key"]], 3)
    np.testing.assert_allclose(m["normalisation"]["mean"], mean, atol=1e-3)
    np.testing.assert_allclose(m["normalisation"]["std"], std, atol=1e-3)


def big_exif_jpeg(image):
    from streamed_files import Image

    exif = Image.Exif()
    exif[0x010E] = "x" * 9000  # its frame header lies beyond the first 4096 bytes
    return encode(image, "JPEG", exif=exif.tobytes())


def test_a_jpeg_whose_frame_header_lies_beyond_4096_bytes_is_read_whole(tmp_path):
    rng = np.random.default_rng(6)
    images = [smooth(rng, (11, 13, 3)) for _ in range(4)]
    records = [pack(float(i % 2), big_exif_jpeg(image), i) for i, image in enumerate(images)]
    rec = write_records(tmp_path / "set.rec", records)
    assert stage(tmp_path / "rec_out", "--source", "recordio", "--path", rec) == 0
    assert manifest(tmp_path / "rec_out")["image_size"] == [11, 13]
    folder = tmp_path / "folder"
    for name, group in (("a", images[:2]), ("b", images[2:])):
        (folder / name).mkdir(parents=True)
        for i, image in enumerate(group):
            (folder / name / f"{i}.jpg").write_bytes(big_exif_jpeg(image))
    assert stage(tmp_path / "dir_out", "--source", "images", "--path", folder) == 0
    assert manifest(tmp_path / "dir_out")["image_size"] == [11, 13]


def test_a_multi_part_record_is_staged_and_read_whole(tmp_path):
    """A payload holding the magic word at a 4-aligned place of its record: MXNet's writer cuts
    the record there; staging measures all its parts and the read joins them back."""
    rng = np.random.default_rng(7)
    images = [smooth(rng, (8, 8)) for _ in range(6)]
    payloads = [encode(image) for image in images]
    # Bytes after a PNG's IEND chunk are ignored by its decoders; pad so the magic is aligned.
    pad = (-(24 + len(payloads[2]))) % 4
    payloads[2] += b"\0" * pad + struct.pack("<I", MAGIC) + b"tail"
    rec = write_records(tmp_path / "set.rec", [pack(float(i % 2), p, i) for i, p in
                                              enumerate(payloads)])  # fmt: skip
    data_at = idx_offsets(rec)[2]
    assert struct.unpack_from("<I", rec.read_bytes(), data_at + 4)[0] >> 29 == 1  # two parts
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec) == 0
    data = opened(tmp_path / "out")
    for split in ("train", "test"):
        for i, row in enumerate(data.index[split]):
            label, payload = data.read(split, i)
            assert payload == payloads[row["key"]] and label == row["key"] % 2


def test_restaging_replaces_a_streamed_dataset(tmp_path):
    images, labels = gray_set(np.random.default_rng(12), n=10, classes=2)
    rec = image_rec(tmp_path / "set.rec", images, labels)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 1) == 0
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 2) == 0
    assert manifest(tmp_path / "out")["seed"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
