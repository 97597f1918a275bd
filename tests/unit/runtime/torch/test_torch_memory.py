"""PyTorch's DynamicBatch keeps the memory its iterations free on a CPU (`runtime.common.heap`):
in a process of its own (a group of one rank), blocks freed and allocated again after it is
built fault no page in again, and with `hold_memory=False` they do, as under glibc's defaults."""

import pytest
from helpers import freed_blocks_faults, glibc_only

BUILT = """
import sys
import torch
from dynalloc.runtime.torch import DynamicBatch, init_process_group

init_process_group()
model = torch.nn.Linear(8, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
DynamicBatch(model, optimizer, 64, 16, pin_cores=False, hold_memory=sys.argv[1] == "hold")
"""


@glibc_only
@pytest.mark.parametrize(("mode", "held"), [("hold", True), ("leave", False)])
def test_dynamic_batch_holds_freed_memory_on_a_cpu_unless_told_not_to(mode, held):
    _, counted = freed_blocks_faults(BUILT, mode, timeout=120)
    assert counted < 50 if held else counted >= 1000  # ten 1 MiB blocks: 2,560 pages
