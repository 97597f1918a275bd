"""write_staged / load_staged: round trip, normalisation, atomic output, every check on load."""

import json

import numpy as np
import pytest
from dynalloc.data.staged import DATA_FILES, StagedDataset, load_staged, write_staged
from dynalloc.data.stagedir import MANIFEST_NAME, file_sha256
from dynalloc.errors import DynallocError

CLASSES = 3


def raw_arrays(seed=0, n_train=40, n_test=12):
    rng = np.random.default_rng(seed)
    return (
        rng.integers(0, 256, size=(n_train, 1, 4, 4)).astype(np.uint8),
        np.arange(n_train) % CLASSES,
        rng.integers(0, 256, size=(n_test, 1, 4, 4)).astype(np.uint8),
        np.arange(n_test) % CLASSES,
    )


def stage(out_dir, arrays=None, **kwargs):
    return write_staged(
        out_dir, *(arrays or raw_arrays()), source="test", classes=CLASSES, **kwargs
    )


@pytest.fixture
def staged(tmp_path):
    return stage(tmp_path / "staged", extra={"seed": 7})


def rewrite_npy(path, array):
    """Replace a staged file and fix its manifest hash, so that only the check under test fails."""
    np.save(path, array)
    refresh_hash(path)


def refresh_hash(path):
    manifest_path = path.parent / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"][path.name] = file_sha256(path)
    manifest_path.write_text(json.dumps(manifest))


def edit_manifest(path, edit):
    manifest = json.loads((path / MANIFEST_NAME).read_text())
    edit(manifest)
    (path / MANIFEST_NAME).write_text(json.dumps(manifest))


def assert_one_line_naming(error, name):
    message = str(error.value)
    assert "\n" not in message
    assert name in message


def test_round_trip_memory_maps_normalised_arrays(staged):
    train_x, train_y, test_x, test_y = raw_arrays()
    data = load_staged(staged)
    assert isinstance(data, StagedDataset)
    assert data.classes == CLASSES and data.input_shape == (1, 4, 4)
    for array in (data.train_x, data.train_y, data.test_x, data.test_y):
        assert isinstance(array, np.memmap) and not array.flags.writeable
    assert data.train_x.dtype == np.float32 and data.train_y.dtype == np.int32
    assert data.train_x.shape == (40, 1, 4, 4) and data.test_x.shape == (12, 1, 4, 4)
    np.testing.assert_array_equal(data.train_y, train_y)
    np.testing.assert_array_equal(data.test_y, test_y)
    assert abs(float(data.train_x.mean())) < 1e-5
    assert abs(float(data.train_x.std()) - 1) < 1e-5
    norm = data.manifest["normalisation"]
    assert norm == {"mean": train_x.mean(), "std": train_x.std(), "computed_on": "train"}
    np.testing.assert_allclose(data.test_x, (test_x - norm["mean"]) / norm["std"], rtol=1e-6)


def test_manifest_fields(staged):
    manifest = json.loads((staged / MANIFEST_NAME).read_text())
    assert manifest["format_version"] == 1
    assert manifest["source"] == "test" and manifest["classes"] == CLASSES
    assert manifest["input_shape"] == [1, 4, 4]
    assert manifest["splits"]["test"] == {
        "n": 12,
        "x_shape": [12, 1, 4, 4],
        "x_dtype": "float32",
        "y_dtype": "int32",
    }
    assert manifest["sha256"] == {name: file_sha256(staged / name) for name in DATA_FILES}
    assert manifest["dynalloc_version"] and manifest["seed"] == 7


def test_replaces_an_earlier_dataset_and_leaves_nothing_beside_it(tmp_path):
    stage(tmp_path / "staged")
    stage(tmp_path / "staged", arrays=raw_arrays(seed=1, n_train=30))
    assert load_staged(tmp_path / "staged").train_x.shape[0] == 30
    assert [path.name for path in tmp_path.iterdir()] == ["staged"]


def test_refuses_to_replace_a_directory_that_is_not_a_dataset(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(DynallocError) as error:
        stage(tmp_path / "home")
    assert_one_line_naming(error, "home")
    assert [path.name for path in (tmp_path / "home").iterdir()] == ["thesis.tex"]
    assert [path.name for path in tmp_path.iterdir()] == ["home"]


def test_uncreatable_parent_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DynallocError) as error:
        stage(tmp_path / "file" / "sub" / "staged")
    assert_one_line_naming(error, str(tmp_path / "file" / "sub"))


def test_failure_while_writing_removes_the_temporary_directory(tmp_path, monkeypatch):
    stage(tmp_path / "staged")
    before = (tmp_path / "staged" / "train_x.npy").read_bytes()
    calls = []

    def failing_hash(path):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        return file_sha256(path)

    monkeypatch.setattr("dynalloc.data.stagedir.file_sha256", failing_hash)
    with pytest.raises(OSError, match="disk full"):
        stage(tmp_path / "staged", arrays=raw_arrays(seed=1))
    assert [path.name for path in tmp_path.iterdir()] == ["staged"]
    assert (tmp_path / "staged" / "train_x.npy").read_bytes() == before


def bad_nan(x, y):
    x = x.astype(np.float32)
    x[5, 0, 1, 2] = np.nan
    return x, y


def bad_inf(x, y):
    x = x.astype(np.float64)
    x[0, 0, 0, 0] = np.inf
    return x, y


@pytest.mark.parametrize(
    ("corrupt", "words"),
    [
        (bad_nan, "NaN in the data (image 5)"),
        (bad_inf, "infinite value in the data"),
        (lambda x, y: (x, np.where(y == 2, 3, y)), "label 3 outside [0, 3)"),
        (lambda x, y: (x, np.where(y == 2, -1, y)), "label -1 outside"),
        (lambda x, y: (x, y[:-1]), "39 labels"),
        (lambda x, y: (x[:, 0], y), "(N, C, H, W)"),
        (lambda x, y: (x, y.astype(np.float32)), "integer labels"),
        (lambda x, y: (np.zeros_like(x), y), "same value"),
        (lambda x, y: (x[:, :, :2], y), "test images"),
    ],
)
def test_bad_arrays_are_refused_before_anything_is_written(tmp_path, corrupt, words):
    train_x, train_y, test_x, test_y = raw_arrays()
    train_x, train_y = corrupt(train_x, train_y)
    with pytest.raises(DynallocError) as error:
        stage(tmp_path / "staged", arrays=(train_x, train_y, test_x, test_y))
    assert_one_line_naming(error, words)
    assert list(tmp_path.iterdir()) == []


def flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def write_nan(path):
    x = np.load(path, mmap_mode="r+")
    x[3, 0, 2, 2] = np.nan
    x.flush()
    del x
    refresh_hash(path)


def set_n(manifest, split, n):
    manifest["splits"][split]["n"] = n
    manifest["splits"][split]["x_shape"][0] = n


BAD_DATASETS = {
    "manifest missing": (lambda p: (p / MANIFEST_NAME).unlink(), MANIFEST_NAME, "missing"),
    "manifest not JSON": (
        lambda p: (p / MANIFEST_NAME).write_text("{"),
        MANIFEST_NAME,
        "not valid JSON",
    ),
    "manifest lacks a key": (
        lambda p: edit_manifest(p, lambda m: m.pop("sha256")),
        MANIFEST_NAME,
        "sha256",
    ),
    "manifest lacks a split key": (
        lambda p: edit_manifest(p, lambda m: m["splits"]["test"].pop("y_dtype")),
        MANIFEST_NAME,
        "splits.test.y_dtype",
    ),
    "manifest shape inconsistent": (
        lambda p: edit_manifest(p, lambda m: m.update(input_shape=[1, 4, 5])),
        MANIFEST_NAME,
        "x_shape",
    ),
    "data file missing": (lambda p: (p / "test_y.npy").unlink(), "test_y.npy", "missing"),
    "byte flipped": (lambda p: flip_last_byte(p / "train_x.npy"), "train_x.npy", "corrupted"),
    "shape differs": (
        lambda p: edit_manifest(p, lambda m: set_n(m, "train", 39)),
        "train_x.npy",
        "shape",
    ),
    "x dtype differs": (
        lambda p: edit_manifest(p, lambda m: m["splits"]["test"].update(x_dtype="float64")),
        "test_x.npy",
        "dtype",
    ),
    "y dtype differs": (
        lambda p: rewrite_npy(p / "train_y.npy", np.arange(40, dtype=np.int64) % CLASSES),
        "train_y.npy",
        "dtype",
    ),
    "label count": (
        lambda p: rewrite_npy(p / "test_y.npy", np.zeros(11, dtype=np.int32)),
        "test_y.npy",
        "11 labels",
    ),
    "label out of range": (
        lambda p: rewrite_npy(p / "test_y.npy", np.full(12, CLASSES, dtype=np.int32)),
        "test_y.npy",
        "outside [0, 3)",
    ),
    "not an npy file": (
        lambda p: (p / "test_y.npy").write_bytes(b"junk") or refresh_hash(p / "test_y.npy"),
        "test_y.npy",
        ".npy",
    ),
    "NaN": (lambda p: write_nan(p / "train_x.npy"), "train_x.npy", "NaN in the data"),
}


@pytest.mark.parametrize("case", BAD_DATASETS)
def test_load_refuses_a_bad_dataset_with_one_line_naming_the_file(staged, case):
    corrupt, name, words = BAD_DATASETS[case]
    corrupt(staged)
    with pytest.raises(DynallocError) as error:
        load_staged(staged)
    assert_one_line_naming(error, str(staged / name))
    assert words in str(error.value)


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(DynallocError) as error:
        load_staged(tmp_path / "nowhere")
    assert_one_line_naming(error, str(tmp_path / "nowhere"))


def test_without_verify_only_byte_level_checks_are_skipped(staged):
    flip_last_byte(staged / "train_x.npy")
    assert load_staged(staged, verify=False).train_x.shape == (40, 1, 4, 4)
    edit_manifest(staged, lambda m: set_n(m, "train", 39))
    with pytest.raises(DynallocError, match="shape"):
        load_staged(staged, verify=False)


def test_scans_find_bad_values_in_later_blocks(staged, monkeypatch):
    # three images per block
    monkeypatch.setattr("dynalloc.data.blocks.SCAN_BLOCK_BYTES", 8 * 16 * 3)
    assert load_staged(staged).train_x.shape[0] == 40
    x = np.load(staged / "train_x.npy", mmap_mode="r+")
    x[37, 0, 3, 3] = np.inf
    x.flush()
    del x
    refresh_hash(staged / "train_x.npy")
    with pytest.raises(DynallocError, match=r"infinite value in the data \(image 37\)"):
        load_staged(staged)
