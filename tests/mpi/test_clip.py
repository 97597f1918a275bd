"""Gradients clipped by their global norm between the exchange and the step (`clip_loop.py`):
after `step.synchronize(loss)`, or the Horovod face's `trainer.allreduce_grads(loss)`, 2 ranks
at 1:3 train the model of 1 process; each rank's own gradients clipped before the exchange
train another."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import mpi_python

pytestmark = pytest.mark.mpi

LOOP = Path(__file__).with_name("clip_loop.py")


def clip_loop(tmp_path, ranks, *options):
    """(rank 0's final parameters, its shares, the iterations the clip bound) of clip_loop.py
    on `ranks` ranks."""
    out = tmp_path / f"r{ranks}{''.join(options)}"
    result = mpi_python(ranks, LOOP, out, *options)
    assert result.returncode == 0, result.stderr[-3000:]
    shares = json.loads(Path(f"{out}.shares.json").read_text())
    return np.load(f"{out}.npy"), shares, json.loads(Path(f"{out}.clipped.json").read_text())


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    return clip_loop(tmp_path_factory.mktemp("one"), 1)[0]


@pytest.mark.parametrize("face", ["dynamic", "trainer"])
def test_clipped_after_the_exchange_the_model_is_one_process(one_process, tmp_path, face):
    params, shares, clipped = clip_loop(tmp_path, 2, "--face", face, "--slow", "1=3")
    worst = np.abs(params - one_process).max()
    print(f"{face}: max |difference| {worst:.1e}, shares {shares}, clipped {clipped} of 20")
    assert clipped >= 10, clipped  # the clip bound: what it changes was tested
    assert sum(share != 32 for share in shares) >= 10, shares  # and at uneven splits
    assert worst < 1e-6


def test_each_ranks_own_gradients_clipped_train_another_model(one_process, tmp_path):
    """The mistake `synchronize` is there to avoid: clipped before `step.finish(loss)`
    alone, each rank's norm is its own share's."""
    params, _, _ = clip_loop(tmp_path, 2, "--face", "early", "--slow", "1=3")
    worst = np.abs(params - one_process).max()
    print(f"clipped before the exchange: max |difference| {worst:.1e}")
    assert worst > 1e-3
