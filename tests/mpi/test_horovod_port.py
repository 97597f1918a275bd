"""Horovod's MXNet MNIST example (examples/ports/horovod_mxnet), ported to dynalloc: on 2 MPI
ranks at 1:3 it trains the model of 1 process, its slow rank given fewer samples, in the lines
README states beyond replacing its download."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import BIN, ENV, ROOT, mpi_python, stage_mnist

pytestmark = pytest.mark.mpi

PORT = ROOT / "examples" / "ports" / "horovod_mxnet"
RUNNER = Path(__file__).parent / "horovod_runner.py"
SAVED_AT = 10  # the iteration after which the parameters are compared (horovod_runner says why)


def port(tmp_path, ranks, *options):
    """The port on `ranks` MPI ranks, in a directory of its own: (rank 0's parameters after
    SAVED_AT iterations, each rank's shares as it wrote them, the log)."""
    run = tmp_path / f"r{ranks}"
    stage_mnist(run / "mnist")
    command = [BIN / "mpiexec", "-n", str(ranks), sys.executable, RUNNER, "--save-at", SAVED_AT,
               *options]  # fmt: skip
    result = subprocess.run(list(map(str, command)), cwd=run, capture_output=True, text=True,
                            env=ENV, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(run / "saved.npz") as saved:
        params = np.concatenate([saved[name].ravel() for name in saved.files])
    shares = {int(p.stem.removeprefix("shares-")): json.loads(p.read_text())
              for p in run.glob("shares-*.json")}  # fmt: skip
    return params, shares, result.stderr


def test_horovods_mxnet_mnist_trains_the_model_of_one_process_balanced(tmp_path):
    script = PORT / "mxnet_mnist.py"
    # Horovod's script scales the learning rate by the ranks: the same 0.02 for both runs.
    one, _, _ = port(tmp_path, 1, script, "--epochs", "3", "--batch-size", "64", "--lr", "0.02")
    two, shares, log = port(tmp_path, 2, "--slow", "1=3", script, "--epochs", "3",
                            "--batch-size", "32", "--lr", "0.01")  # fmt: skip
    accuracy = float(re.findall(r"Validation: accuracy=([\d.]+)", log)[-1])
    worst = np.abs(two - one).max()
    print(f"Horovod mxnet_mnist, 2 ranks at 1:3 vs 1 process: max |difference| {worst:.1e} "
          f"after {SAVED_AT} iterations (shares {shares[1][:SAVED_AT]} of 64), "
          f"validation accuracy {accuracy:.3f}, slow rank's shares {shares[1][-5:]}")  # fmt: skip
    assert worst < 1e-6
    # The compared iterations ran on uneven splits, at least three of them (MXNet's warm-up
    # holds the equal split through the first, and a loaded machine's noise a few more).
    assert sum(share < 32 for share in shares[1][:SAVED_AT]) >= 3, shares[1][:SAVED_AT]
    assert accuracy > 0.96  # the script's own check, at its last epoch
    assert np.mean(shares[1][-20:]) < 0.4 * 64, shares[1]  # the slow rank's share fell


def test_the_port_is_a_handful_of_lines():
    diff = subprocess.run(["diff", "-u", PORT / "upstream_staged.py", PORT / "mxnet_mnist.py"],
                          capture_output=True, text=True).stdout  # fmt: skip
    added = len(re.findall(r"^\+(?!\+\+)", diff, re.M))
    removed = len(re.findall(r"^-(?!--)", diff, re.M))
    print(f"Horovod mxnet_mnist ported in {added} lines added and {removed} removed")
    assert added <= 20


REFUSALS = """
import mxnet as mx
from mxnet import autograd, gluon
import dynalloc.mxnet as hvd
from dynalloc.errors import DynallocError

def refused(call):
    try:
        call()
    except DynallocError as error:
        print("refused:", error)
    else:
        raise AssertionError("not refused")

net = gluon.nn.Dense(2)
net.initialize()
refused(lambda: hvd.broadcast_parameters(net.collect_params()))  # deferred shapes
net(mx.nd.zeros((1, 3)))
hvd.broadcast_parameters(net.collect_params())
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                                 dataset_size=8, global_batch=4)
data = gluon.data.ArrayDataset(mx.nd.ones((8, 3)), mx.nd.zeros(8))
loader = gluon.data.DataLoader(data, batch_sampler=trainer.batch_sampler())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
refused(lambda: trainer.step(loss_fn(net(mx.nd.ones((4, 3))), mx.nd.zeros(4))))  # no batch
batches = trainer.epoch(0, loader)
x, y = next(batches)
with autograd.record():
    loss = loss_fn(net(x), y)
loss.backward()
refused(lambda: trainer.step(4))  # Horovod's batch size
refused(lambda: trainer.allreduce_grads())  # Gluon's, with no losses
print("mean loss", trainer.step(loss))
next(batches)
refused(lambda: next(batches))  # the next batch before this one's step
"""


def test_the_trainer_refuses_what_would_train_otherwise(tmp_path):
    script = tmp_path / "refusals.py"
    script.write_text(REFUSALS)
    result = mpi_python(1, script)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("refused:")]
    assert len(lines) == 5, result.stdout
    assert "forward pass" in lines[0] or "deferred" in lines[0], lines[0]
    assert "trainer.epoch" in lines[1] and "trainer.step(loss)" in lines[2], lines
    assert "trainer.allreduce_grads(loss)" in lines[3], lines[3]
    assert "ends with trainer.step(loss)" in lines[4], lines[4]
    assert "mean loss" in result.stdout
