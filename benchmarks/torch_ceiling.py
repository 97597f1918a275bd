"""The best that any split can do for `make bench-torch`'s slowdown scenario, from PyTorch's own
cost of a share on this CPU: torch's LeNet gets slower per sample as the batch grows, so the
fast rank's larger share costs more per sample than the equal split's, and the ceiling of
adaptive / plain DDP at 1:3 is below the 2x that costs linear in the batch would give.

One process, one thread, pinned to core 0: the median seconds of forward and backward at each
share (multiples of 16), then the equal split's time (the slow rank, 3x its cost at 256), the
best split's (the min-max over the splits of 512) and their ratio, also with a few milliseconds
per iteration spent outside the compute, which both runs pay.

    OMP_NUM_THREADS=1 .venv-torch/bin/python benchmarks/torch_ceiling.py
"""

import os
import time

import numpy as np
import torch
from dynalloc.runtime.torch.models import build_model

GLOBAL_BATCH, SLOWDOWN = 512, 3


def seconds(net, loss, optimizer, batch, repeats=9):
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    spent = []
    for repeat in range(repeats + 2):  # two to warm up
        began = time.perf_counter()
        optimizer.zero_grad()
        loss(net(x), y).backward()
        if repeat >= 2:
            spent.append(time.perf_counter() - began)
    return float(np.median(spent))


def main():
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {0})
    net = build_model("lenet", 10, (1, 28, 28), 0)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss = torch.nn.CrossEntropyLoss()
    cost = {b: seconds(net, loss, optimizer, b) for b in range(16, GLOBAL_BATCH, 16)}
    for batch in (128, 256, 384):
        print(f"share {batch}: {cost[batch] * 1e3:.1f} ms, {batch / cost[batch]:,.0f} samples/s")
    equal = SLOWDOWN * cost[GLOBAL_BATCH // 2]
    best, fast = min((max(cost[b], SLOWDOWN * cost[GLOBAL_BATCH - b]), b) for b in cost)
    print(f"equal split {equal * 1e3:.1f} ms, best split {fast}/{GLOBAL_BATCH - fast} "
          f"{best * 1e3:.1f} ms: ceiling {equal / best:.3f}x")  # fmt: skip
    for outside in (0.005, 0.010):
        ratio = (equal + outside) / (best + outside)
        print(f"with {outside * 1e3:.0f} ms an iteration outside the compute: {ratio:.3f}x")


if __name__ == "__main__":
    main()
