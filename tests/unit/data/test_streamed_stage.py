"""`dynalloc stage --source recordio|images` (streamed): the index, split and manifest of a
RecordIO pair or a folder of class folders made here, with and without `--val-path`; and every
bad input refused with one line naming the file or record, with nothing written."""

import hashlib
import struct

import numpy as np
import pytest
from dynalloc.data.images import decode_pixels
from dynalloc.data.records import MAGIC
from dynalloc.data.streamed import INDEX_DTYPE, load_streamed
from streamed_files import (
    encode,
    idx_offsets,
    image_folder,
    image_rec,
    manifest,
    pack,
    smooth,
    stage,
    stage_refused,
    write_records,
)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gray_set(rng, n=30, shape=(9, 7), classes=3):
    return [smooth(rng, shape) for _ in range(n)], np.arange(n) % classes


def true_normalisation(images, channels):
    """Per-channel mean and std of every pixel of `images` (each at its own size) as
    `channels` channels: what staging estimates from up to 1000 of them."""
    pixels = np.concatenate(
        [decode_pixels(encode(image), channels).reshape(-1, channels) for image in images]
    ).astype(np.float64)
    return pixels.mean(axis=0), pixels.std(axis=0)


def opened(out):
    return load_streamed(out, manifest(out))


# ---- recordio ------------------------------------------------------------------------------


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


# ---- image folders --------------------------------------------------------------------------


def folder_set(root, rng, counts, shape=(6, 5, 3)):
    classes = {name: [smooth(rng, shape) for _ in range(n)] for name, n in counts.items()}
    return image_folder(root, classes), classes


def test_an_image_folder_is_indexed_with_its_class_names(tmp_path, capsys):
    rng = np.random.default_rng(8)
    root, classes = folder_set(tmp_path / "train", rng, {"cat": 6, "dog": 5, "ant": 4})
    (root / ".hidden").mkdir()  # skipped, as are dot files
    (root / "cat" / ".DS_Store").write_bytes(b"junk")
    assert stage(tmp_path / "out", "--source", "images", "--path", root, "--seed", 1) == 0
    assert "staged images (streamed): 12 train + 3 test images of 6x5, 3 channel(s), 3 classes"
    assert "12 train + 3 test images of 6x5, 3 channel(s), 3 classes" in capsys.readouterr().out
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "test_index.npy", "test_paths.npy", "train_index.npy", "train_paths.npy",
    ]  # fmt: skip
    m = manifest(out)
    assert m["source"] == "images" and m["class_names"] == ["ant", "cat", "dog"]
    assert m["classes"] == 3 and m["channels"] == 3 and m["image_size"] == [6, 5]
    assert m["files"] == [{"path": str(root), "images": 15, "bytes": m["files"][0]["bytes"]}]
    on_disk = sum(p.stat().st_size for p in root.rglob("*.png"))
    assert m["files"][0]["bytes"] == on_disk
    assert set(m["sha256"]) == {p.name for p in out.iterdir()} - {"manifest.json"}
    data = opened(out)
    seen = []
    for split in ("train", "test"):
        for i, row in enumerate(data.index[split]):
            path = data.paths[split][row["file"]].decode()
            name, file = path.split("/")
            number = int(file.removeprefix("img").removesuffix(".png"))
            seen.append(path)
            assert row["label"] == m["class_names"].index(name)
            assert data.name(split, i) == str(root / path)
            assert data.read(split, i) == (row["label"], encode(classes[name][number]))
    assert len(set(seen)) == 15
    assert sorted(np.bincount(data.index["test"]["label"])) == [1, 1, 1]
    everyone = [classes[p.split("/")[0]][int(p[-7:-4])] for p in
                (data.paths["train"][r["file"]].decode() for r in data.index["train"])]  # fmt: skip
    mean, std = true_normalisation(everyone, 3)
    np.testing.assert_allclose(m["normalisation"]["mean"], mean, atol=1e-3)
    np.testing.assert_allclose(m["normalisation"]["std"], std, atol=1e-3)


def test_a_folder_split_follows_the_seed(tmp_path):
    rng = np.random.default_rng(9)
    root, _ = folder_set(tmp_path / "train", rng, {"a": 10, "b": 10})
    for name, seed in (("x", 4), ("y", 4), ("z", 5)):
        assert stage(tmp_path / name, "--source", "images", "--path", root, "--seed", seed) == 0
    tests = {}
    for name in "xyz":
        data = opened(tmp_path / name)
        tests[name] = sorted(data.paths["test"][r["file"]] for r in data.index["test"])
    assert tests["x"] == tests["y"] != tests["z"]
    assert (tmp_path / "x" / "test_paths.npy").read_bytes() == (
        tmp_path / "y" / "test_paths.npy"
    ).read_bytes()


def test_a_validation_folder_may_lack_a_class(tmp_path):
    rng = np.random.default_rng(10)
    root, _ = folder_set(tmp_path / "train", rng, {"ant": 3, "bee": 3, "cat": 3})
    val, val_classes = folder_set(tmp_path / "val", rng, {"cat": 2, "ant": 1})
    args = ["--source", "images", "--path", root, "--val-path", val]
    assert stage(tmp_path / "out", *args) == 0
    m = manifest(tmp_path / "out")
    assert m["class_names"] == ["ant", "bee", "cat"] and m["classes"] == 3
    assert m["split"] == "the files' own"
    assert [f["path"] for f in m["files"]] == [str(root), str(val)]
    data = opened(tmp_path / "out")
    assert data.train_size == 9 and data.test_size == 3
    assert sorted(data.index["test"]["label"]) == [0, 2, 2]  # the training folder's numbers
    for i, row in enumerate(data.index["test"]):
        name = data.paths["test"][row["file"]].decode().split("/")[0]
        assert data.name("test", i).startswith(str(val / name))
        number = int(data.paths["test"][row["file"]].decode()[-7:-4])
        assert data.read("test", i)[1] == encode(val_classes[name][number])


def test_images_in_sub_folders_and_jpegs_of_mixed_modes_are_found(tmp_path):
    rng = np.random.default_rng(11)
    root = tmp_path / "train"
    for name in ("a", "b"):
        (root / name / "deeper").mkdir(parents=True)
        (root / name / "x.JPG").write_bytes(encode(smooth(rng, (8, 8)), "JPEG"))
        (root / name / "deeper" / "y.jpeg").write_bytes(encode(smooth(rng, (8, 8, 3)), "JPEG"))
        (root / name / "z.png").write_bytes(encode(smooth(rng, (8, 9, 3))))
    assert stage(tmp_path / "out", "--source", "images", "--path", root) == 0
    m = manifest(tmp_path / "out")
    assert m["channels"] == 3 and m["image_size"] is None
    data = opened(tmp_path / "out")
    paths = sorted(data.paths[s][r["file"]].decode() for s in ("train", "test")
                   for r in data.index[s])  # fmt: skip
    assert paths == ["a/deeper/y.jpeg", "a/x.JPG", "a/z.png", "b/deeper/y.jpeg", "b/x.JPG",
                     "b/z.png"]  # fmt: skip


def test_restaging_replaces_a_streamed_dataset(tmp_path):
    images, labels = gray_set(np.random.default_rng(12), n=10, classes=2)
    rec = image_rec(tmp_path / "set.rec", images, labels)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 1) == 0
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 2) == 0
    assert manifest(tmp_path / "out")["seed"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---- bad input: one line naming the file or record, nothing written -------------------------


def rec_of(tmp_path, records=None, n=6):
    """A RecordIO pair of `n` small good images, record k replaced by records[k] if given."""
    rng = np.random.default_rng(13)
    good = [pack(float(k % 2), encode(smooth(rng, (5, 4))), k) for k in range(n)]
    for key, record in (records or {}).items():
        good[key] = record
    return write_records(tmp_path / "set.rec", good)


def val_rec(tmp_path):
    rng = np.random.default_rng(16)
    records = [pack(float(k % 2), encode(smooth(rng, (5, 4))), k) for k in range(2)]
    return write_records(tmp_path / "val.rec", records)


def test_a_rec_without_its_idx_is_refused(tmp_path, capfd):
    rec = rec_of(tmp_path)
    rec.with_suffix(".idx").unlink()
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, rec.with_suffix(".idx"), "index missing")


def test_a_missing_rec_is_refused(tmp_path, capfd):
    args = ["--source", "recordio", "--path", tmp_path / "none.rec"]
    stage_refused(capfd, tmp_path / "out", args, tmp_path / "none.rec", "not found")


def test_an_index_past_the_end_of_the_rec_is_refused(tmp_path, capfd):
    rec = rec_of(tmp_path)
    idx = rec.with_suffix(".idx")
    idx.write_text(idx.read_text() + f"6\t{rec.stat().st_size + 64}\n")
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, idx, "record 6 starts at byte", str(rec))


def test_a_truncated_rec_is_refused(tmp_path, capfd):
    rec = rec_of(tmp_path)
    rec.write_bytes(rec.read_bytes()[:-9])
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, rec, "record 5 is truncated")


@pytest.mark.parametrize(
    ("record", "text"),
    [
        (b"no header", "record 3 has no label"),
        (pack([1.0, 0.0], b"\x89PNG"), "record 3 has 2 labels"),
        (pack(0.5, b"\x89PNG"), "record 3 has label 0.5, not a class index"),
        (pack(-2.0, b"\x89PNG"), "record 3 has label -2"),
        (pack(1.0, b"a text, not an image"), "record 3 is not a JPEG or PNG image"),
        (pack(1.0, b""), "record 3 is not a JPEG or PNG image"),
    ],
    ids=["no label", "several labels", "fraction", "negative", "not an image", "no image"],
)
def test_bad_records_are_refused(tmp_path, capfd, record, text):
    rec = rec_of(tmp_path, {3: record})
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, f"{rec}: {text}")


def test_an_undecodable_image_in_the_normalisation_sample_is_named(tmp_path, capfd):
    png = bytearray(encode(smooth(np.random.default_rng(0), (5, 4))))
    png[40:48] = b"garbage!"  # the header is intact, the pixels are not
    rec = rec_of(tmp_path, {1: pack(1.0, bytes(png), 1)})
    args = ["--source", "recordio", "--path", rec, "--val-path", val_rec(tmp_path)]  # all train
    line = stage_refused(capfd, tmp_path / "out", args, f"{rec}: record 1: cannot decode the")
    assert "libpng error" in line  # what libpng printed on fd 2 is in the line, not beside it


def test_a_truncated_jpeg_in_the_normalisation_sample_is_named(tmp_path, capfd):
    rng = np.random.default_rng(0)
    jpeg = encode(smooth(rng, (16, 16, 3)) ^ rng.integers(0, 255, (16, 16, 3), np.uint8), "JPEG")
    rec = rec_of(tmp_path, {2: pack(0.0, jpeg[: len(jpeg) // 2], 2)})
    args = ["--source", "recordio", "--path", rec, "--val-path", val_rec(tmp_path)]
    stage_refused(capfd, tmp_path / "out", args, f"{rec}: record 2: cannot decode", "truncated")


def test_images_of_one_colour_cannot_be_normalised(tmp_path, capfd):
    flat = encode(np.full((4, 4), 7, np.uint8))
    rec = write_records(tmp_path / "set.rec", [pack(float(k % 2), flat, k) for k in range(4)])
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, rec, "one colour")


def test_a_class_of_one_image_cannot_be_split(tmp_path, capfd):
    rng = np.random.default_rng(14)
    records = [pack(float(k > 0), encode(smooth(rng, (4, 4))), k) for k in range(5)]
    rec = write_records(tmp_path / "set.rec", records)
    args = ["--source", "recordio", "--path", rec]
    stage_refused(capfd, tmp_path / "out", args, rec, "class 0 has one image")


def test_a_validation_rec_without_its_idx_is_refused(tmp_path, capfd):
    rec = rec_of(tmp_path)
    val = tmp_path / "val.rec"
    val.write_bytes(rec.read_bytes())
    args = ["--source", "recordio", "--path", rec, "--val-path", val]
    stage_refused(capfd, tmp_path / "out", args, val.with_suffix(".idx"), "index missing")


def good_folder(tmp_path, name="train", counts=None):
    rng = np.random.default_rng(15)
    return folder_set(tmp_path / name, rng, counts or {"a": 3, "b": 3})[0]


@pytest.mark.parametrize(
    ("damage", "named", "text"),
    [
        (lambda root: (root / "c").mkdir(), "c", "empty class folder"),
        (lambda root: (root / "c" / "sub").mkdir(parents=True), "c", "empty class folder"),
        (lambda root: (root / "a" / "notes.txt").write_text("hi"), "a/notes.txt", "not an image"),
        (lambda root: (root / "b" / "x.jpg").write_text("I am text"), "b/x.jpg", "not a JPEG"),
        (lambda root: (root / "b" / "x.png").write_bytes(b""), "b/x.png", "not a JPEG or PNG"),
        (lambda root: (root / "b" / "x.gif").write_bytes(encode(np.zeros((3, 3), np.uint8),
                                                                 "GIF")), "b/x.gif",
         "not an image"),
        (lambda root: (root / "readme.md").write_text("x"), "readme.md", "beside the class"),
    ],
    ids=["empty class", "only folders", "text file", "text as jpg", "empty png", "gif", "stray"],
)  # fmt: skip
def test_bad_image_folders_are_refused(tmp_path, capfd, damage, named, text):
    root = good_folder(tmp_path)
    damage(root)
    args = ["--source", "images", "--path", root]
    stage_refused(capfd, tmp_path / "out", args, root / named, text)


def test_a_validation_folder_with_a_class_the_training_folder_lacks(tmp_path, capfd):
    root = good_folder(tmp_path)
    val = good_folder(tmp_path, "val", {"a": 1, "z": 1})
    args = ["--source", "images", "--path", root, "--val-path", val]
    stage_refused(capfd, tmp_path / "out", args, val / "z", "a class the training folder")


def test_a_bad_image_in_the_validation_folder_is_refused(tmp_path, capfd):
    root = good_folder(tmp_path)
    val = good_folder(tmp_path, "val", {"a": 1})
    (val / "a" / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # a signature and nothing more
    args = ["--source", "images", "--path", root, "--val-path", val]
    stage_refused(capfd, tmp_path / "out", args, val / "a" / "bad.png", "not a JPEG or PNG")


@pytest.mark.parametrize(
    ("make", "text"),
    [(lambda p: None, "image folder not found"), (lambda p: p.mkdir(), "holds no class folders")],
    ids=["missing", "empty"],
)
def test_a_missing_or_empty_folder_is_refused(tmp_path, capfd, make, text):
    make(tmp_path / "train")
    args = ["--source", "images", "--path", tmp_path / "train"]
    stage_refused(capfd, tmp_path / "out", args, tmp_path / "train", text)


def test_the_streamed_options_are_refused_where_they_do_not_apply(tmp_path, capfd):
    root = good_folder(tmp_path)
    rec = rec_of(tmp_path)
    stage_refused(
        capfd, tmp_path / "out", ["--source", "images", "--path", root, "--in-memory"],
        "--in-memory", "only for --source recordio",
    )  # fmt: skip
    stage_refused(
        capfd, tmp_path / "out", ["--source", "recordio", "--path", rec, "--in-memory",
                                  "--val-path", rec],
        "--val-path", "streamed sources",
    )  # fmt: skip
    stage_refused(capfd, tmp_path / "out", ["--source", "digits", "--val-path", rec], "--val-path")
    stage_refused(capfd, tmp_path / "out", ["--source", "images"], "--source images", "--path")
