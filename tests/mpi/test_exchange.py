"""The MPI layer on real ranks."""

import json
import os
import re
from pathlib import Path

import pytest
from helpers import mpi_python

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_weighted_allreduce_allgather_and_broadcast(ranks):
    result = mpi_python(ranks, Path(__file__).with_name("exchange_check.py"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok") == ranks


def test_batchnorm_statistics_are_averaged_over_ranks():
    result = mpi_python(2, Path(__file__).with_name("state_check.py"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count(" ok") == 2


def test_dynamic_batch_takes_a_name_a_spec_or_a_policy():
    result = mpi_python(2, Path(__file__).with_name("policy_forms.py"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count(" ok") == 2


@pytest.mark.parametrize("pinning", ["one-core", "none"])
def test_early_ranks_sleep_only_where_ranks_outnumber_their_cores(pinning):
    result = mpi_python(2, Path(__file__).with_name("wait_mode.py"), pinning)
    assert result.returncode == 0, result.stderr[-2000:]
    shared = pinning == "one-core" or len(os.sched_getaffinity(0)) < 2
    assert result.stdout.count(" ok, sleeps" if shared else " ok, spins") == 2, result.stdout


COUNTED = """
import collections
import json
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from dynalloc.mxnet import DynamicBatch
from dynalloc.runtime.mxnet.exchange import GradientExchange

calls = collections.Counter()
for name in ("allreduce", "allgather", "allsum"):
    real = getattr(GradientExchange, name)
    setattr(GradientExchange, name,
            lambda self, *a, real=real, name=name: calls.update([name]) or real(self, *a))
mx.random.seed(0)
net = gluon.nn.Dense(3)
net.initialize()
net(mx.nd.zeros((1, 4)))
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
dyn = DynamicBatch(net.collect_params(), trainer, 64, 16, slowdown=lambda i: 1 + dyn.rank)
calls.clear()
x, y = np.random.default_rng(0).random((64, 4), dtype=np.float32), np.arange(64) % 3
for step in dyn.epoch(0):
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(mx.nd.array(x[step.indices])),
                                                    mx.nd.array(y[step.indices]))
    loss.backward()
    mean = step.finish(loss)
    assert np.isfinite(mean)
print(f"rank {dyn.rank} collectives {json.dumps(dict(calls))} in {len(dyn.rows)} iterations,"
      f" waits {json.dumps([row.wait_s for row in dyn.rows])}"
      f" busy {json.dumps([row.compute_s + row.data_s for row in dyn.rows])}")
"""


def test_the_ranks_times_travel_with_the_gradients(tmp_path):
    """One collective an iteration: the gradients' Allreduce carries every rank's times, loss
    and stop request (no gather of their own), and each rank sees the others' (its wait)."""
    script = tmp_path / "counted.py"
    script.write_text(COUNTED)
    result = mpi_python(2, script)
    assert result.returncode == 0, result.stderr[-3000:]
    # non-greedy: the two ranks' lines may share a line of the pipe, in either order
    found = re.findall(
        r"rank (\d) collectives (\{.*?\}) in (\d+) iterations, waits (\[.*?\]) busy (\[.*?\])",
        result.stdout,
    )
    ranks = {int(rank): (json.loads(calls), int(n), json.loads(waits), json.loads(busy))
             for rank, calls, n, waits, busy in found}  # fmt: skip
    assert sorted(ranks) == [0, 1], result.stdout
    for calls, iterations, _, _ in ranks.values():
        assert calls == {"allreduce": iterations} and iterations == 4
    # Each rank's wait is the slowest busy time minus its own (float32 on the way): the times
    # arrived. Not that rank 0 waits: a loaded machine's noise can outrun rank 1's slowdown here.
    slowest = [max(times) for times in zip(ranks[0][3], ranks[1][3], strict=True)]
    for _, _, waits, busy in ranks.values():
        assert waits == pytest.approx([s - b for s, b in zip(slowest, busy, strict=True)], abs=1e-6)
    assert any(w > 0 for _, _, waits, _ in ranks.values() for w in waits)
