"""Gluon's DynamicBatch keeps the memory its iterations free (`runtime.common.heap`): in a
process of its own (one MPI rank), blocks freed and allocated again after it is built fault no
page in again, and with `hold_memory=False` they do, as under glibc's defaults."""

import pytest
from helpers import freed_blocks_faults, glibc_only

BUILT = """
import sys
from mxnet import gluon
from dynalloc.runtime.mxnet.gluon import DynamicBatch

net = gluon.nn.Dense(4, in_units=8)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
DynamicBatch(net.collect_params(), trainer, 64, 16, pin_cores=False,
             hold_memory=sys.argv[1] == "hold")
"""


@glibc_only
@pytest.mark.parametrize(("mode", "held"), [("hold", True), ("leave", False)])
def test_dynamic_batch_holds_freed_memory_unless_told_not_to(mode, held):
    _, counted = freed_blocks_faults(BUILT, mode, timeout=120)
    assert counted < 50 if held else counted >= 1000  # ten 1 MiB blocks: 2,560 pages
