"""`dynalloc stage --source recordio|images` (streamed) refuses every bad input, a RecordIO pair
or a folder of class folders, with one line naming the file or record, and writes nothing."""

import numpy as np
import pytest
from streamed_files import (
    encode,
    folder_set,
    pack,
    smooth,
    stage_refused,
    write_records,
)


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
