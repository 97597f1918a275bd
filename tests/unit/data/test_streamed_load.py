"""Opening a streamed dataset (`load_streamed`, `open_dataset`): the checks that cost time in
proportion to the index only, each fault one line naming its file; and `input_shape`, the size
the network takes, with the run config's `stream` section."""

import builtins
import io
import json
import os

import numpy as np
import pytest
from dynalloc.data import streamed
from dynalloc.data.dataset import input_shape, open_dataset
from dynalloc.data.images import BadImage, decode_pixels
from dynalloc.data.records import BadRecord
from dynalloc.data.staged import StagedDataset
from dynalloc.data.streamed import StreamedDataset, load_streamed
from dynalloc.errors import DynallocError
from dynalloc.experiment.stream_config import check_stream
from streamed_files import idx_offsets, image_folder, image_rec, manifest, smooth, stage


@pytest.fixture
def staged_rec(tmp_path):
    """(staged directory, .rec) of 12 gray PNGs of mixed sizes in a RecordIO pair."""
    rng = np.random.default_rng(0)
    images = [smooth(rng, (6, 7) if k % 2 else (9, 5)) for k in range(12)]
    rec = image_rec(tmp_path / "set.rec", images, np.arange(12) % 3)
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec) == 0
    return tmp_path / "out", rec


@pytest.fixture
def staged_folder(tmp_path):
    rng = np.random.default_rng(1)
    classes = {name: [smooth(rng, (5, 5, 3)) for _ in range(4)] for name in ("x", "y")}
    root = image_folder(tmp_path / "images", classes)
    assert stage(tmp_path / "folder_out", "--source", "images", "--path", root) == 0
    return tmp_path / "folder_out", root


def refused(path, *texts):
    with pytest.raises(DynallocError) as caught:
        open_dataset(path)
    message = str(caught.value)
    assert "\n" not in message
    for text in texts:
        assert str(text) in message, message
    return message


def test_open_dataset_gives_a_streamed_dataset(staged_rec):
    out, rec = staged_rec
    data = open_dataset(out)
    assert isinstance(data, StreamedDataset)
    assert data.path == out and data.source == "recordio" and data.classes == 3
    assert data.channels == 1 and data.image_size is None
    assert data.train_size + data.test_size == 12
    assert isinstance(data.index["train"], np.memmap)  # the index is mapped, not read
    assert decode_pixels(data.read("train", 0)[1], 1).shape[2] == 1


def test_a_rec_of_another_size_is_named(staged_rec):
    out, rec = staged_rec
    size = rec.stat().st_size
    with open(rec, "ab") as handle:
        handle.write(b"\0" * 16)  # e.g. records appended, or another file of that name
    refused(out, rec, f"{size + 16} bytes, but {size} when staged", "stage it again")


def test_a_changed_idx_is_named(staged_rec):
    out, rec = staged_rec
    idx = rec.with_suffix(".idx")
    lines = idx.read_text().splitlines()
    idx.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")  # same bytes, reordered
    refused(out, idx, "changed since staging")
    idx.unlink()
    refused(out, idx, "missing or changed")


def test_a_missing_rec_is_named(staged_rec):
    out, rec = staged_rec
    rec.unlink()
    refused(out, rec, "staged source missing")


@pytest.mark.parametrize("name", ["train_index.npy", "test_index.npy"])
def test_a_corrupted_index_is_named(staged_rec, name):
    out, _ = staged_rec
    data = bytearray((out / name).read_bytes())
    data[-3] ^= 0x40  # a byte of the last row
    (out / name).write_bytes(bytes(data))
    refused(out, out / name, "sha256 differs")
    (out / name).unlink()
    refused(out, out / name, "index file missing")


def test_a_corrupted_paths_file_of_a_folder_is_named(staged_folder):
    out, root = staged_folder
    data = bytearray((out / "train_paths.npy").read_bytes())
    data[-2] ^= 0x01
    (out / "train_paths.npy").write_bytes(bytes(data))
    refused(out, out / "train_paths.npy", "sha256 differs")


def test_a_moved_image_folder_is_named(staged_folder):
    out, root = staged_folder
    root.rename(root.with_name("elsewhere"))
    refused(out, root, "staged source missing")


def rewrite_manifest(out, change):
    m = manifest(out)
    change(m)
    (out / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize(
    ("change", "texts"),
    [
        (lambda m: m.pop("sha256"), ["missing key(s) sha256"]),
        (lambda m: m.pop("files"), ["missing key(s) files"]),
        (lambda m: m.update(format_version=2), ["format_version 2 is not 1"]),
        (lambda m: m["sha256"].pop("test_index.npy"), ["no sha256 of test_index.npy"]),
        (lambda m: m["splits"].pop("train"), ["splits.train.n missing"]),
        (lambda m: m["splits"]["test"].update(n=99), ["test_index.npy", "not the index"]),
    ],
    ids=["no sha256", "no files", "version", "an index not vouched for", "no split", "count"],
)
def test_a_manifest_that_does_not_vouch_for_its_index_is_named(staged_rec, change, texts):
    out, _ = staged_rec
    rewrite_manifest(out, change)
    message = refused(out, *texts)
    assert str(out) in message


def test_the_check_reads_the_index_and_not_the_images(staged_rec, monkeypatch):
    """A byte changed in the middle of the .rec (its size unchanged) passes the check; only
    decoding that record finds it. And no file of the .rec is opened while checking."""
    out, rec = staged_rec
    offsets = idx_offsets(rec)
    data = bytearray(rec.read_bytes())
    middle = offsets[6] + 8 + 24 + 45  # inside the PNG of record 6, past its header
    data[middle] ^= 0xFF
    rec.write_bytes(bytes(data))

    opened, real_open, real_os_open = [], builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    hashed = []
    real_sha = streamed.file_sha256
    monkeypatch.setattr(streamed, "file_sha256", lambda p: hashed.append(str(p)) or real_sha(p))
    dataset = open_dataset(out)
    monkeypatch.undo()
    assert str(rec) not in opened and str(rec) not in hashed
    assert str(rec.with_suffix(".idx")) in hashed  # the .idx is hashed: it is small

    bad = [
        (split, i)
        for split in ("train", "test")
        for i, row in enumerate(dataset.index[split])
        if row["key"] == 6
    ]
    [(split, i)] = bad
    _, payload = dataset.read(split, i)  # the framing is intact
    with pytest.raises(BadImage):
        decode_pixels(payload, 1)
    for other in range(len(dataset.index[split])):
        if other != i:
            decode_pixels(dataset.read(split, other)[1], 1)


def test_a_record_changed_in_place_is_named_when_read(staged_rec):
    out, rec = staged_rec
    dataset = open_dataset(out)
    row = dataset.index["train"][2]
    data = bytearray(rec.read_bytes())
    data[int(row["offset"]) : int(row["offset"]) + 4] = b"\0\0\0\0"  # its magic word
    rec.write_bytes(bytes(data))
    with pytest.raises(BadRecord, match=f"{rec}: record {row['key']}: no RecordIO record"):
        dataset.read("train", 2)
    # A label changed in place (same framing): the staged label disagrees.
    data[int(row["offset"]) : int(row["offset"]) + 4] = b"\x0a\x23\xd7\xce"
    label_at = int(row["offset"]) + 8 + 4
    data[label_at : label_at + 4] = np.float32(row["label"] + 1).tobytes()
    rec.write_bytes(bytes(data))
    with pytest.raises(BadRecord, match=f"record {row['key']} has label {row['label'] + 1}, st"):
        dataset.read("train", 2)


def test_a_folder_image_deleted_after_staging_is_named_when_read(staged_folder):
    out, root = staged_folder
    dataset = open_dataset(out)
    path = root / dataset.paths["train"][dataset.index["train"][0]["file"]].decode()
    path.unlink()
    with pytest.raises(BadRecord, match=f"{path}: cannot read"):
        dataset.read("train", 0)


# ---- input_shape -------------------------------------------------------------------------


def config(**stream):
    return {"stream": check_stream(stream)}


def test_mixed_sizes_need_stream_input_size(staged_rec):
    data = open_dataset(staged_rec[0])
    with pytest.raises(DynallocError) as caught:
        input_shape(data, config())
    message = str(caught.value)
    assert message.startswith("stream.input_size:")
    assert "from 6x7 to 9x5 pixels" in message and str(staged_rec[0]) in message
    assert input_shape(data, config(input_size=[16, 12])) == (1, 16, 12)
    assert input_shape(data, config(input_size=8)) == (1, 8, 8)


def test_one_size_is_the_input_size_unless_another_is_given(staged_folder):
    data = open_dataset(staged_folder[0])
    assert data.image_size == (5, 5)
    assert input_shape(data, config()) == (3, 5, 5)
    assert input_shape(data, config(input_size=[3, 4])) == (3, 3, 4)


@pytest.mark.parametrize(
    ("stream", "key"),
    [({"mean": [1, 2]}, "stream.mean"), ({"std": [1, 2, 3, 4]}, "stream.std")],
)
def test_mean_and_std_need_one_value_or_one_per_channel(staged_folder, stream, key):
    data = open_dataset(staged_folder[0])
    with pytest.raises(DynallocError, match=rf"^{key}: \d values for images of 3 channel"):
        input_shape(data, config(**stream))
    assert input_shape(data, config(mean=100, std=[50, 60, 70])) == (3, 5, 5)


def test_a_stream_section_with_an_in_memory_dataset_is_refused(tmp_path):
    args = ["--source", "synthetic", "--samples", "40", "--shape", "1,4,4", "--classes", "2"]
    assert stage(tmp_path / "arrays", *args) == 0
    data = open_dataset(tmp_path / "arrays")
    assert isinstance(data, StagedDataset)
    assert input_shape(data, config()) == (1, 4, 4)
    for stream in ({"input_size": 8}, {"on_bad_record": "skip"}, {"flip": False}):
        with pytest.raises(DynallocError, match="config key 'stream' applies to streamed") as e:
            input_shape(data, config(**stream))
        assert str(tmp_path / "arrays") in str(e.value)


def test_load_streamed_and_open_dataset_agree(staged_rec):
    out, _ = staged_rec
    a, b = open_dataset(out), load_streamed(out, manifest(out))
    for split in ("train", "test"):
        np.testing.assert_array_equal(np.asarray(a.index[split]), np.asarray(b.index[split]))
    assert a.read("test", 1) == b.read("test", 1)
