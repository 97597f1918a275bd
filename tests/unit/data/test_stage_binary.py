"""`dynalloc stage --source idx|cifar10` (`dynalloc.data.binary`) from small files made here:
each stages the files' own split in order, and each damaged file gives one line naming it; and
the `--path` that the file sources need and the others refuse."""

import gzip
import struct

import numpy as np
import pytest
from dynalloc.data.staged import load_staged
from file_sources import assert_one_line_naming, raw_images, run_stage, truncate

IDX_STEMS = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
CIFAR_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


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
    "truncated gzip": ("train-images-idx3-ubyte.gz", truncate, "truncated gzip"),
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
    truncate(tmp_path / "idx" / "t10k-images-idx3-ubyte", keep=-1)
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
    "truncated": ("data_batch_2.bin", truncate, "truncated"),
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
