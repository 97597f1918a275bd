"""Gluon's DynamicBatch keeps the memory its iterations free (`runtime.common.heap`): in a
process of its own (one MPI rank), blocks freed and allocated again after it is built fault no
page in again, and with `hold_memory=False` they do, as under glibc's defaults."""

import os
import subprocess
import sys

import pytest

ITERATIONS = """
import ctypes, resource, sys
import mxnet as mx
from mxnet import gluon
from dynalloc.runtime.mxnet.gluon import DynamicBatch

net = gluon.nn.Dense(4, in_units=8)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
DynamicBatch(net.collect_params(), trainer, 64, 16, pin_cores=False,
             hold_memory=sys.argv[1] == "hold")
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc((1 << 20) + 4096))  # a mapped block freed: glibc's thresholds slide up
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc((1 << 20) - 4096) for _ in range(10)]
    for block in blocks:
        ctypes.memset(block, 1, (1 << 20) - 4096)
    for block in blocks:
        libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(max(faults[1:]))
"""


def faults(mode):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    result = subprocess.run(
        [sys.executable, "-c", ITERATIONS, mode], capture_output=True, text=True, timeout=120,
        env=clean, check=True,
    )  # fmt: skip
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")),
    reason="glibc's malloc only",
)
@pytest.mark.parametrize(("mode", "held"), [("hold", True), ("leave", False)])
def test_dynamic_batch_holds_freed_memory_unless_told_not_to(mode, held):
    counted = faults(mode)
    assert counted < 50 if held else counted >= 1000  # ten 1 MiB blocks: 2,560 pages
