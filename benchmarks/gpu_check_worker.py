"""The ranks of benchmarks/gpu_check.py (its docstring says what they check), under torchrun:

    python -m torch.distributed.run --standalone --nproc_per_node=R \
        benchmarks/gpu_check_worker.py DIR [--cpu]

One rank trains the reference; two run every check. Rank 0 saves the final parameters of each
exactness run (DIR/exact-VARIANT-R.npy), every rank its figures (DIR/figures-R-RANK.json).
"""

import argparse
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from dynalloc.runtime.torch.hook import SlowBuckets
from dynalloc.runtime.torch.models import build_model
from dynalloc.torch import DynamicBatch, init_process_group
from gpu_check import CLASSES, SIZES, SLOW, VARIANTS
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.functional import cross_entropy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder the results go to")
    parser.add_argument("--cpu", action="store_true", help="the self-test, on the CPU")
    args = parser.parse_args()
    out, cuda = args.out, not args.cpu
    nccl = cuda and torch.cuda.device_count() >= 2
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        device = torch.device("cuda", local if nccl else 0)
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    rank, ranks = init_process_group("nccl" if nccl else "gloo")
    ctx = SimpleNamespace(rank=rank, ranks=ranks, device=device, cuda=cuda, nccl=nccl,
                          size=SIZES["cuda" if cuda else "cpu"])  # fmt: skip
    figures = {"backend": str(dist.get_backend()), "cuda": cuda, "exact": {}, "timing": {}}
    for variant in VARIANTS if ranks > 1 else ["module"]:
        params, figures["exact"][variant] = exact(ctx, variant == "ddp")
        if rank == 0:
            np.save(out / f"exact-{variant}-{ranks}.npy", params)
    if ranks > 1:
        for variant in VARIANTS:
            figures["timing"][variant] = timing(ctx, variant == "ddp")
        figures["throughput"] = throughput(ctx)
    (out / f"figures-{ranks}-{rank}.json").write_text(json.dumps(figures))


def data(ctx, samples, seed=0):
    rng = np.random.default_rng(seed)
    shape = ctx.size["shape"]
    teacher = rng.standard_normal((int(np.prod(shape)), CLASSES)).astype(np.float32)
    x = rng.standard_normal((samples, *shape), dtype=np.float32)
    y = (x.reshape(samples, -1) @ teacher).argmax(1)
    return torch.from_numpy(x).to(ctx.device), torch.from_numpy(y).to(ctx.device)


def lenet(ctx, ddp, dtype=torch.float32):
    model = build_model("lenet", CLASSES, ctx.size["shape"], seed=0).to(ctx.device, dtype)
    if not ddp:
        return model
    ids = [ctx.device.index] if ctx.nccl else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


def dynamic(ctx, model, samples, batch, policy="adaptive", slowdown=1.0):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    return DynamicBatch(model, optimizer, samples, batch, policy=policy, seed=0,
                        slowdown=lambda iteration: slowdown)  # fmt: skip


def steps(dyn, count):
    """The first `count` steps of `dyn`, epoch after epoch."""
    epoch = 0
    while True:
        for step in dyn.epoch(epoch):
            yield step
            count -= 1
            if count == 0:
                return
        epoch += 1


def train_step(ctx, model, step, x, y, marks=None):
    """One forward and backward in `step.compute()`; `marks.start()` as it begins; returns the
    seconds the host took to queue them."""
    index = torch.as_tensor(step.indices, device=ctx.device)
    with step.compute():
        began = time.perf_counter()
        if marks is not None:
            marks.start()
        loss = cross_entropy(model(x[index]), y[index])
        loss.backward()
        queued = time.perf_counter() - began
    step.finish(loss)
    return queued


def exact(ctx, ddp):
    samples, batch, iterations = ctx.size["exact"]
    # In float64: in float32 a ReLU or a pooling's max flips now and then on the last bit of a
    # sum whose order the shares set, and one flip moved a parameter by ~1e-4 (seen).
    x, y = data(ctx, samples)
    x = x.double()
    slowdown = SLOW if ctx.rank == 1 else 1.0
    dyn = dynamic(ctx, lenet(ctx, ddp, torch.float64), samples, batch, slowdown=slowdown)
    losses = []
    for step in steps(dyn, iterations):
        train_step(ctx, dyn.model, step, x, y)
        losses.append(step.loss)
    params = torch.cat([p.detach().reshape(-1) for p in dyn.module.parameters()])
    shares = [row.batch_size for row in dyn.rows]
    return params.cpu().numpy(), {"shares": shares, "losses": losses, "batch": batch}


class Marks:
    """The start and the end of one forward and backward: CUDA events on a GPU; on the CPU the
    thread's CPU time, what the rank computed itself, without what its other threads took from
    its core (gloo's, spinning: `hook.ShareWeight.one_core`). The end is marked when the first
    parameter's gradient is computed, the last of the backward pass (DDP's last bucket holds
    it, and before it is ready, nothing is sent)."""

    def __init__(self, cuda, parameter):
        self.cuda, self.began, self.ended = cuda, None, None
        parameter.register_hook(self.end)

    def now(self):
        if not self.cuda:
            return time.thread_time()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start(self):
        self.began = self.now()

    def end(self, gradient):
        self.ended = self.now()

    def seconds(self):
        if not self.cuda:
            return self.ended - self.began
        self.ended.synchronize()
        return self.began.elapsed_time(self.ended) / 1e3


def timing(ctx, ddp):
    """[compute_s, marked seconds, seconds to queue] of each iteration on this rank."""
    batch, iterations = ctx.size["timing"]
    x, y = data(ctx, batch)
    dyn = dynamic(ctx, lenet(ctx, ddp), batch, batch, policy="static")
    marks = Marks(ctx.cuda, next(dyn.module.parameters()))
    found = []
    for step in steps(dyn, iterations):
        queued = train_step(ctx, dyn.model, step, x, y, marks)
        found.append([dyn.rows[-1].compute_s, marks.seconds(), queued])
    return found


def calibrate(ctx, target_s=0.010):
    """The global batch whose share takes a rank about `target_s` forward and backward: LeNet
    at 1,024 samples timed by rank 0 alone, the others waiting."""
    found = [ctx.size["throughput"][3]]
    if found[0] is None and ctx.rank == 0:
        model, n = lenet(ctx, False), 1024
        x = torch.randn(n, *ctx.size["shape"], device=ctx.device)
        y = torch.zeros(n, dtype=torch.int64, device=ctx.device)
        for i in range(8):
            if i == 3:
                torch.cuda.synchronize()
                began = time.perf_counter()
            cross_entropy(model(x), y).backward()
        torch.cuda.synchronize()
        per_sample = (time.perf_counter() - began) / 5 / n
        found = [int(np.clip(round(target_s / per_sample / 256), 1, 64)) * 256 * ctx.ranks]
    dist.broadcast_object_list(found, src=0)
    return found[0]


def held_then_averaged(slow, bucket):
    """benchmarks/ddp_plain.py's hook: DDP's own average, once the emulated slowdown lets the
    bucket go (that script reads a staged dataset on the CPU, so it is not run itself)."""
    slow.hold(bucket.buffer().device)
    return allreduce_hook(None, bucket)


def throughput(ctx):
    warm, timed, repeats, _ = ctx.size["throughput"]
    batch = calibrate(ctx)
    x, y = data(ctx, 4 * batch)
    rates, shares = {"adaptive": [], "plain": []}, None
    for _ in range(repeats):
        for kind in rates:
            rate, found = samples_per_s(ctx, kind, x, y, batch, warm, timed)
            rates[kind].append(rate)
            shares = found or shares
    figures = {kind: float(np.median(r)) for kind, r in rates.items()}
    return {**figures, "batch": batch, "shares": shares, "runs": [warm, timed, repeats]}


def samples_per_s(ctx, kind, x, y, batch, warm, timed):
    """Samples/s of `timed` iterations after `warm`, on DDP; the adaptive run's last shares."""
    model, factor, began = lenet(ctx, True), SLOW if ctx.rank == 1 else 1.0, None
    if kind == "adaptive":
        dyn = dynamic(ctx, model, len(x), batch, slowdown=factor)
        for i, step in enumerate(steps(dyn, warm + timed)):
            if i == warm:
                began = clock(ctx)
            train_step(ctx, model, step, x, y)
        return timed * batch / (clock(ctx) - began), dyn.shares.tolist()
    slow, optimizer = SlowBuckets(), torch.optim.SGD(model.parameters(), lr=0.02)
    model.register_comm_hook(slow, held_then_averaged)
    rng, per_epoch = np.random.default_rng(0), len(x) // batch
    for i in range(warm + timed):
        if i == warm:
            began = clock(ctx)
        k = i % per_epoch  # DistributedSampler's split of the global batch: every ranks-th
        if k == 0:
            order = rng.permutation(len(x))
        index = torch.as_tensor(order[k * batch : (k + 1) * batch][ctx.rank :: ctx.ranks],
                                device=ctx.device)  # fmt: skip
        optimizer.zero_grad()
        slow.start(factor)
        cross_entropy(model(x[index]), y[index]).backward()
        optimizer.step()
    return timed * batch / (clock(ctx) - began), None


def clock(ctx):
    """The wall clock once every rank has done all it queued."""
    if ctx.cuda:
        torch.cuda.synchronize()
    dist.barrier()
    return time.perf_counter()


if __name__ == "__main__":
    main()
