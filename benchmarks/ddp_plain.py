"""Plain PyTorch DDP, as users run it today: every rank takes an equal share of each global batch
(`DistributedSampler`, `DataLoader`), DDP averages the gradients. The baseline of `make
bench-torch`, on the same staged dataset, network, global batch, optimizer and emulated
slowdown as the dynalloc runs it is compared with.

    torchrun --standalone --nproc_per_node=R benchmarks/ddp_plain.py --dataset DIR \
        --model lenet --global-batch 512 --epochs E --lr 0.01 [--slow RANK=FACTOR] --out OUT.json

A slowed rank hands each gradient bucket to DDP's all-reduce as late as a device `factor` times
slower would, as dynalloc's DDP runs emulate a scenario's slowdown (`runtime.torch.hook.
SlowBuckets`, ahead of DDP's own averaging hook), so the others wait for it as they would for a
slow device. Rank 0 writes samples/s of the training
loop (set-up excluded) and the final test accuracy to OUT.json.
"""

import argparse
import json
import time
from pathlib import Path

from dynalloc.launcher import launcher_rank
from dynalloc.runtime.common.placement import pin_to_core

pin_to_core(launcher_rank())  # one core per rank, as dynalloc train pins its ranks

import numpy as np  # noqa: E402
import torch  # noqa: E402
from dynalloc.runtime.torch import init_process_group  # noqa: E402
from dynalloc.runtime.torch.hook import SlowBuckets  # noqa: E402
from dynalloc.runtime.torch.models import build_model  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a staged dataset (arrays)")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--global-batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--slow", nargs="*", default=[], help="RANK=FACTOR")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    torch.set_num_threads(1)
    rank, ranks = init_process_group()
    train_x = np.load(args.dataset / "train_x.npy", mmap_mode="r")
    train_y = np.load(args.dataset / "train_y.npy", mmap_mode="r")
    data = TensorDataset(torch.tensor(np.asarray(train_x, np.float32)),
                         torch.tensor(np.asarray(train_y, np.int64)))  # fmt: skip
    sampler = DistributedSampler(data, ranks, rank, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.global_batch // ranks, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(
        build_model(args.model, int(train_y.max()) + 1, train_x.shape[1:], args.seed)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    factor = float(dict(s.split("=") for s in args.slow).get(str(rank), "1"))
    slow = held_back(model)
    samples, began = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            slow.start(factor)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            samples += len(x) * ranks
    seconds = time.perf_counter() - began
    accuracy = evaluate(model.module, args.dataset)
    if rank == 0:
        figures = {"samples_per_s": samples / seconds, "seconds": seconds,
                   "test_accuracy": accuracy, "ranks": ranks, "slow": args.slow}  # fmt: skip
        args.out.write_text(json.dumps(figures) + "\n")


def held_back(model):
    """DDP's own averaging on `model`, each bucket held by the `SlowBuckets` returned (call its
    `start(factor)` as each forward pass begins)."""
    slow = SlowBuckets()
    model.register_comm_hook(slow, held_then_averaged)
    return slow


def held_then_averaged(slow, bucket):
    """DDP's own hook (the average over the ranks), once the emulated slowdown lets the bucket
    go."""
    slow.hold(bucket.buffer().device)
    return allreduce_hook(None, bucket)


def evaluate(net, dataset):
    test_x = torch.tensor(np.load(dataset / "test_x.npy").astype(np.float32))
    test_y = torch.tensor(np.load(dataset / "test_y.npy").astype(np.int64))
    net.eval()
    with torch.no_grad():
        return float((net(test_x).argmax(1) == test_y).float().mean())


if __name__ == "__main__":
    main()
