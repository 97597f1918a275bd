"""What the tests of `dynalloc stage`'s file sources (idx, cifar10, recordio --in-memory, npz)
share: the command run in-process, the staged pixels recovered, the one-line refusal naming the
file, a file cut short, random images."""

import numpy as np
from dynalloc.cli import main
from dynalloc.data.staged import load_staged


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


def truncate(path, keep=-7):
    path.write_bytes(path.read_bytes()[:keep])


def random_images(rng, n, shape):
    return rng.integers(0, 256, (n, *shape), dtype=np.uint8)
