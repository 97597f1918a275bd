"""The Gluon example of docs/own-training.md, taken from the page and run on real MPI ranks."""

import re
from pathlib import Path

import pytest
from helpers import mpi_python

pytestmark = pytest.mark.mpi

PAGE = Path(__file__).parents[2] / "docs" / "own-training.md"

SETUP = """
import numpy as np
mx.random.seed(0)  # a reproducible initialisation: the test asserts an accuracy
from dynalloc.data.staged import load_staged

data = load_staged({dataset!r})
train_x, train_y = data.train_x, data.train_y
input_shape, epochs = tuple(data.input_shape), 10


def build_your_net():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(10))
    return net
"""

CHECK = """
rows = np.array([row[4] for row in dyn.rows])  # compute_s of every iteration of this rank
assert len(dyn.rows) == epochs * -(-len(train_x) // 512) and np.all(rows > 0)
correct = (net(mx.nd.array(data.test_x)).argmax(axis=1).asnumpy() == data.test_y).mean()
print(f"rank {dyn.rank}: shares {dyn.shares.tolist()}, test accuracy {correct:.3f}")
assert correct > 0.8, correct
"""


def page_example(heading="## Your own Gluon training loop"):
    text = PAGE.read_text()
    section = text.split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_trains_on_two_ranks(digits, tmp_path):
    code = page_example()
    imports, rest = code.split("\nnet = build_your_net()", 1)
    script = tmp_path / "example.py"
    script.write_text(
        imports + SETUP.format(dataset=str(digits)) + "\nnet = build_your_net()" + rest + CHECK
    )
    result = mpi_python(2, script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("test accuracy") == 2


LOADER_CHECK = (
    """
from mpi4py import MPI
taken = MPI.COMM_WORLD.allreduce(sum(row[3] for row in dyn.rows))  # batch_size, every rank's
assert taken == epochs * len(train_x), taken
"""
    + CHECK
)


def test_the_dataloader_example_trains_on_two_ranks(digits, tmp_path):
    code = page_example()
    imports, rest = code.split("\nnet = build_your_net()", 1)
    before_loop = rest.split("\nfor epoch in range(epochs):", 1)[0]
    loop = page_example("### Your DataLoader")
    script = tmp_path / "example.py"
    script.write_text(
        imports + SETUP.format(dataset=str(digits)) + "\nnet = build_your_net()" + before_loop
        + "\n" + loop + LOADER_CHECK
    )  # fmt: skip
    result = mpi_python(2, script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("test accuracy") == 2
