"""A PyTorch training loop with dynalloc, as docs/pytorch.md's example has it, under any launcher:

    torchrun --standalone --nproc_per_node=R loop.py OUT [--ddp] [--slow RANK=FACTOR ...]
    mpiexec -n R python loop.py OUT ...

Trains the built-in mlp on 600 random 8x8 samples, global batch 128, 3 epochs, `adaptive`;
each rank writes its pid (OUT.pid-RANK) once the group is joined; at the end rank 0 saves the
final parameters (OUT.params.npy) and rank 0's shares, and every rank the sample indices it
was given (OUT.indices-RANK.npy, one row per epoch of -1-padded indices).
"""

import argparse
import collections
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from dynalloc.runtime.torch import DynamicBatch, init_process_group
from dynalloc.runtime.torch.models import build_model
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--ddp", action="store_true")
parser.add_argument("--buckets", action="store_true", help="DDP with a bucket per parameter")
parser.add_argument("--slow", nargs="*", default=[], help="RANK=FACTOR")
parser.add_argument("--loss", default="mean", choices=["mean", "per-sample"])
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--probe", action="store_true", help="warm-start adaptive from a probe")
parser.add_argument(
    "--own-step", action="store_true", help="a DDP script's optimizer.step() left in"
)
parser.add_argument("--loader", type=int, help="read through a DataLoader with this many workers")
parser.add_argument("--step-backward", action="store_true", help="step.backward(loss) instead")
parser.add_argument("--count", action="store_true", help="print the loop's collectives")
parser.add_argument("--bf16", action="store_true", help="the model and samples in bfloat16")
parser.add_argument("--amp", action="store_true",
                    help="a GradScaler; the last rank's gradients overflow once")  # fmt: skip
parser.add_argument("--clip", choices=["synchronized", "early"],
                    help="clip the gradients' norm after step.synchronize(loss), or before "
                    "step.finish(loss) alone")  # fmt: skip
args = parser.parse_args()
CLIP_NORM = 0.5  # of the mean loss's gradient: it binds in most iterations
OVERFLOW = 5  # the iteration whose gradients overflow under --amp

rank, ranks = init_process_group()
Path(f"{args.out}.pid-{rank}").write_text(str(os.getpid()))
model = build_model("mlp", 10, (1, 8, 8), seed=0)
dtype = torch.bfloat16 if args.bf16 else torch.float32
model = model.to(dtype)
if args.ddp:  # the mlp fits one bucket; from the second iteration on, --buckets makes 5
    model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-4 if args.buckets else 25)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
data = np.random.default_rng(0)
x_all = torch.tensor(data.random((600, 1, 8, 8), dtype=np.float32)).to(dtype)
y_all = torch.tensor(data.integers(0, 10, 600))
factors = {int(r): float(f) for r, f in (s.split("=") for s in args.slow)}
policy = {"name": "adaptive", **({"warm_start": "probe"} if args.probe else {})}
scaler = None
if args.amp:  # the last rank's gradients overflow at one iteration: every rank skips that step
    scaler = torch.amp.GradScaler("cpu")
    first = next(getattr(model, "module", model).parameters())
    first.register_hook(lambda grad: grad * float("inf")
                        if rank == ranks - 1 and dyn.iteration == OVERFLOW else grad)  # fmt: skip
dyn = DynamicBatch(model, optimizer, len(x_all), 128, policy=policy, seed=0, scaler=scaler,
                   slowdown=lambda iteration: factors.get(rank, 1.0))  # fmt: skip
loss_fn = nn.CrossEntropyLoss(reduction="none" if args.loss == "per-sample" else "mean")
if args.probe:  # a forward and backward pass of n samples, through the module itself
    module = getattr(model, "module", model)
    dyn.probe(lambda n: loss_fn(module(x_all[:n]), y_all[:n]).mean().backward())
if args.loader is not None:  # the framework's own data path: workers, prefetch, collate
    dataset = torch.utils.data.TensorDataset(x_all, y_all)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=dyn.batch_sampler(),
                                         num_workers=args.loader)  # fmt: skip
calls = collections.Counter()
if args.count:  # the Python collectives from here on (DDP's own go in C++, dynalloc's hook not)
    # all-reduces at the process group, where `dist.all_reduce` and dynalloc's hook both call it
    for owner, name, label in ((dist.ProcessGroup, "allreduce", "all_reduce"),
                               (dist, "all_gather", "all_gather"), (dist, "broadcast", "broadcast"),
                               (dist, "barrier", "barrier")):  # fmt: skip
        real = getattr(owner, name)
        setattr(owner, name, lambda *a, f=real, n=label, **k: calls.update([n]) or f(*a, **k))
seen, clipped = [], 0
for epoch in range(args.epochs):
    mine = []
    if args.loader is None:
        steps = ((step, (x_all[step.indices], y_all[step.indices])) for step in dyn.epoch(epoch))
    else:
        steps = dyn.epoch(epoch, loader=loader)
    for step, (x, y) in steps:
        mine.extend(step.indices.tolist())
        with step.compute():
            loss = loss_fn(model(x), y)
            if args.amp and not args.step_backward:
                scaler.scale(loss).backward()
            elif args.step_backward:
                step.backward(loss)
            else:
                loss.mean().backward()
        if args.clip == "synchronized":
            step.synchronize(loss)
        if args.clip:
            clipped += float(nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)) > CLIP_NORM
        step.finish(loss)
        if args.own_step:
            optimizer.step()
    seen.append(mine)
width = max(len(m) for m in seen)
np.save(f"{args.out}.indices-{rank}.npy", np.array([m + [-1] * (width - len(m)) for m in seen]))
if rank == 0:
    flat = torch.cat([p.detach().float().ravel() for p in model.parameters()]).numpy()
    np.save(f"{args.out}.params.npy", flat)
    np.save(f"{args.out}.shares.npy", np.array([row.batch_size for row in dyn.rows]))
    Path(f"{args.out}.clipped.json").write_text(json.dumps(clipped))
print(f"rank {rank} done: shares {dyn.shares.tolist()}", flush=True)
if args.amp:
    print(f"rank {rank} scale {scaler.get_scale()}", flush=True)
if args.count:
    print(f"rank {rank} collectives {json.dumps(dict(calls))} in {len(dyn.rows)} iterations",
          flush=True)  # fmt: skip
