"""`dynalloc stage --source npz` (`dynalloc.data.npz`): an .npz with its own split, or x and y
split per class, round-trips; each bad file gives one line naming it."""

import numpy as np
import pytest
from dynalloc.data.staged import load_staged
from file_sources import assert_one_line_naming, random_images, raw_images, run_stage, truncate


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
        lambda path: (_savez(x=GOOD_X, y=GOOD_Y)(path), truncate(path, keep=-40)),
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
