"""The Gluon step's read of the per-sample losses through MXNet's C API (`gluon.LossReader`): the
same mean as NDArray.asnumpy().mean() for every dtype and shape it takes, None for what is not
one loss per sample of the share."""

import math

import mxnet as mx
import numpy as np
import pytest
from dynalloc.runtime.mxnet.gluon import LossReader


def losses(shape, dtype="float32"):
    values = np.random.default_rng(0).random(shape) * 10
    return mx.nd.array(values, dtype=dtype)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((32,), "float32"), ((32, 1), "float32"), ((7,), "float32"), ((32, 3), "float32"),
     ((32,), "float64"), ((32,), "float16")],
)  # fmt: skip
def test_the_mean_is_the_mean_of_the_values_read_back(shape, dtype):
    loss = losses(shape, dtype)
    got = LossReader(64).mean(loss, shape[0])
    assert math.isclose(got, float(loss.asnumpy().mean(dtype=np.float64)), rel_tol=1e-12)


def test_a_loss_computed_lazily_is_read_once_the_engine_has_written_it():
    x = mx.nd.ones((512, 512))
    loss = mx.nd.dot(x, x).sum(axis=1) / 512.0  # enqueued: the read must wait for it
    assert LossReader(512).mean(loss, 512) == 512.0


def test_the_buffer_is_reused_without_stale_values():
    reader = LossReader(64)
    assert reader.mean(mx.nd.full((64,), 3.0), 64) == 3.0
    assert reader.mean(mx.nd.full((5,), 1.0), 5) == 1.0


@pytest.mark.parametrize(
    "loss",
    [mx.nd.array([0.5]), mx.nd.ones((31,)), mx.nd.ones((16, 2)), np.ones(32, np.float32), 0.5],
)
def test_what_is_not_one_loss_per_sample_of_the_share_reads_as_none(loss):
    assert LossReader(64).mean(loss, 32) is None
