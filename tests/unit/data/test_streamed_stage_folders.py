"""`dynalloc stage --source images` (streamed): the index, split, class names and manifest of a
folder of class folders made here, with and without `--val-path`."""

import numpy as np
from streamed_files import (
    encode,
    folder_set,
    manifest,
    opened,
    smooth,
    stage,
    true_normalisation,
)


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
