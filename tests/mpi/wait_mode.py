"""Run under mpiexec -n 2: how early ranks wait (argv[1] "one-core" pins both ranks to core 0
first), and that a rank arriving late still gets the exact sum either way."""

import os
import sys
import time

import numpy as np
from dynalloc.runtime.mxnet.exchange import GradientExchange

if sys.argv[1] == "one-core":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
exchange = GradientExchange([np.zeros(1000, np.float32)])
exchange.tensors[0][:] = exchange.rank + 1
if exchange.rank == 0:
    time.sleep(0.05)  # the other rank waits for this one
exchange.allreduce(1.0)
assert np.all(exchange.tensors[0] == sum(range(1, exchange.size + 1))), exchange.tensors[0][:3]
print(f"rank {exchange.rank} ok, {'sleeps' if exchange.sleep_while_waiting else 'spins'}")
